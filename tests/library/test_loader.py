"""The one loader (trainstack/infra/config/loader.py): a stack file's config and a component's inputs become the
same Args dataclass, each field checked by the reader it declares, with the lines the stack parsers always gave."""

import asyncio

import pulumi
import pytest

from trainstack.infra.config.errors import ConfigError, InputError
from trainstack.infra.config.job import JOB_KEYS, KEY, RENAMED_KEYS, parse_job
from trainstack.infra.config.job_settings import Job, SecretEnv
from trainstack.infra.config.known_outputs import known_output
from trainstack.infra.config.loader import InputTypeError, from_inputs, load


def test_the_allowed_keys_come_from_the_dataclass():
    assert JOB_KEYS == ("enabled", "name", "namespace", "podsMin", "podsMax", "gpusPerPod", "procsPerPod",
                        "dataPrefix", "tensorboard", "queue", "queueName", "train", "secretEnv")
    assert RENAMED_KEYS == {"nodesMin": "podsMin", "nodesMax": "podsMax", "gpusPerNode": "gpusPerPod",
                            "procsPerNode": "procsPerPod"}


def test_a_stack_file_object_is_decoded_and_each_field_checked_with_its_full_key():
    job = load(Job, '{"podsMin": "2", "name": " research ", "secretEnv": [{"name": "A", "secretName": "s", '
                    '"key": "k"}]}', KEY)
    assert (job.pods_min, job.name) == (2, "research")
    assert job.secret_env[0].secret_name == "s"
    with pytest.raises(ConfigError) as raised:
        load(Job, {"podsMax": 0}, KEY)
    assert str(raised.value) == ("trainstack:job.podsMax: must be at least 1, got 0. Fix: pulumi config set --path "
                                 "'trainstack:job.podsMax' 1")


def test_an_unknown_key_is_refused_with_a_did_you_mean():
    with pytest.raises(ConfigError) as raised:
        load(Job, {"podMax": 2}, KEY)
    assert str(raised.value) == ("trainstack:job.podMax: unknown key. Fix: remove it or rename it (did you mean "
                                 "trainstack:job.podsMax?)")
    with pytest.raises(ConfigError, match=r"did you mean trainstack:job\.podsMin\?"):
        load(Job, {"nodeMin": 2}, KEY)  # the new name, never the deprecated nodesMin
    with pytest.raises(InputTypeError) as raised:
        from_inputs(Job, {"podMax": 2}, "job")
    assert str(raised.value).startswith("job.podMax: Job has no such field. Fix: use one of data_prefix")


def test_a_non_object_is_refused_in_the_stack_files_terms():
    with pytest.raises(ConfigError) as raised:
        load(Job, "[1, 2]", KEY)
    assert str(raised.value) == (f"trainstack:job: expected an object with keys {', '.join(JOB_KEYS)}, got [1, 2]. "
                                 "Fix: write trainstack:job as a YAML mapping in Pulumi.<stack>.yaml")
    with pytest.raises(InputTypeError, match="^job: expected Job or a dict of its fields, got list"):
        from_inputs(Job, [1, 2], "job")


def test_an_output_in_a_plain_field_is_refused_with_its_path_unless_its_value_was_known():
    asyncio.set_event_loop(asyncio.new_event_loop())  # Outputs are made on the current loop
    with pytest.raises(InputTypeError) as raised:
        from_inputs(Job, {"podsMax": pulumi.Output.from_input(2)}, "job")
    assert str(raised.value).startswith("job.podsMax: takes a plain value, not an output or a secret. Fix:")
    assert from_inputs(Job, {"podsMax": known_output(2)}, "job").pods_max == 2


def test_the_wire_shape_becomes_the_args_camel_or_snake_whole_floats_as_ints():
    job = from_inputs(Job, {"podsMax": 2.0, "gpus_per_pod": 1, "secretEnv": [
        {"name": "A", "secretName": "s", "key": "k"}]}, "job", key=KEY)
    assert (job.pods_max, job.gpus_per_pod) == (2, 1) and isinstance(job.pods_max, int)
    assert job.secret_env[0].name == "A"
    # An Args instance is checked like a dict: the stack file's reader and line, for the component to translate.
    with pytest.raises(ConfigError, match=r"^trainstack:job\.secretEnv\[0\]\.name: 'RANK' is not|RANK is set"):
        from_inputs(Job, Job(secret_env=[SecretEnv(name="RANK", secret_name="s", key="k")]), "job", key=KEY)


def test_an_old_name_moves_to_the_new_one_with_one_warning_and_errors_name_what_was_written(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    job = parse_job({KEY: '{"nodesMax": 4, "gpusPerNode": 1}'}, 1, "GPU node")
    assert (job.pods_max, job.gpus_per_pod) == (4, 1)
    assert warnings == ["trainstack:job.nodesMax is deprecated: rename it to trainstack:job.podsMax (same meaning: "
                        "per pod of the job)", "trainstack:job.gpusPerNode is deprecated: rename it to "
                        "trainstack:job.gpusPerPod (same meaning: per pod of the job)"]
    with pytest.raises(ConfigError) as raised:  # a resolver's error on a renamed key
        parse_job({KEY: '{"nodesMin": 3, "nodesMax": 2}'}, 1, "GPU node")
    assert str(raised.value) == ("trainstack:job.nodesMin: nodesMin (3) is greater than nodesMax (2). Fix: rename "
                                 "nodesMin to podsMin: pulumi config rm --path 'trainstack:job.nodesMin' && pulumi "
                                 "config set --path 'trainstack:job.podsMin' 2")
    with pytest.raises(ConfigError, match=r"^trainstack:job\.nodesMin: both nodesMin and podsMin are set"):
        parse_job({KEY: '{"nodesMin": 1, "podsMin": 1}'}, 1, "GPU node")


def test_a_components_own_renamed_input_is_named_in_its_terms(monkeypatch):
    from trainstack.components.training_job import TrainingJobArgs

    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    args = from_inputs(TrainingJobArgs, {"kubeconfig": "k", "imageRef": "r:1", "nodesMax": 2}, component="TrainingJob 'x'")
    assert args.pods_max == 2 and args.nodes_max is None
    assert warnings == ["TrainingJob 'x': the input nodesMax is deprecated: rename it to podsMax (same meaning: per "
                        "pod of the job)"]
    with pytest.raises(InputError, match=r"^TrainingJob 'x': both nodesMax and podsMax are set"):
        from_inputs(TrainingJobArgs, {"kubeconfig": "k", "imageRef": "r:1", "nodesMax": 2, "podsMax": 2},
                    component="TrainingJob 'x'")


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_a_stack_components_pool_size_error_names_the_renamed_job_input_as_written(cloud, monkeypatch):
    # The cross-check between the job's podsMax and the GPU group's (or pool's) max is the cloud resolver's, not
    # the job's: it too names nodesMax when that is what the caller wrote (the hint alone would add podsMax
    # beside it, which the next run refuses as both set).
    from trainstack.components import aws, gcp
    from trainstack.components.stack_config import stack_errors_as_inputs
    from trainstack.infra.aws.config import PROVIDER_FIELDS as AWS_FIELDS
    from trainstack.infra.aws.config import resolve_aws
    from trainstack.infra.gcp.config import resolve_gcp
    from trainstack.infra.gcp.settings import PROVIDER_FIELDS as GCP_FIELDS

    monkeypatch.setattr(pulumi.log, "warn", lambda *args, **kwargs: None)
    if cloud == "aws":
        inputs = {"region": "us-west-2", "apiPublicAccessCidrs": ["203.0.113.7/32"], "gpuNodes": {"max": 2}}
        fields, resolve, group = AWS_FIELDS, lambda: resolve_aws(aws.checked_args({**inputs, "job": {"nodesMax": 3}}),
                                                                 "dev"), "gpuNodes.max"
    else:
        inputs = {"project": "my-project-123", "gpuPools": {"t4": {"max": 1}}}
        fields, resolve, group = GCP_FIELDS, lambda: resolve_gcp(gcp.checked_args({**inputs, "job": {"nodesMax": 3}}),
                                                                 "dev"), "gpuPools.t4.max"
    with pytest.raises(InputError) as raised, stack_errors_as_inputs(fields):
        resolve()
    assert str(raised.value).startswith("job.nodesMax: 3 pods need ")
    assert f"Fix: rename nodesMax to podsMax: remove the input job.nodesMax && raise {group} to " in str(raised.value)
