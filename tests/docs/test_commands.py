"""Every command, flag, stack output, config key, file and section the documentation shows is true.

One test per kind; each lists every problem it finds (page:line: what), so a change to the code or the
docs shows all the rot it causes at once. The tests at the bottom plant each kind of mistake (the ones
issue 30 found in the docs) and check that it is caught.
"""

from __future__ import annotations

import pytest

from tests.docs import doc_commands, doc_files, doc_stack
from tests.docs.doc_text import REPO, Snippet, all_snippets, markdown_snippets, pages, stack_file_snippets


@pytest.fixture(scope="module")
def snippets() -> list[Snippet]:
    return all_snippets()


def _report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s) in the documentation:\n" + "\n".join(problems)


def test_the_pages_are_found(snippets):
    names = {p.relative_to(REPO).as_posix() for p in pages()}
    assert {"README.md", "docs/training.md", "docs/aws.md", "examples/yaml-gke/README.md"} <= names
    assert len(snippets) > 500


def test_commands_and_flags_exist(snippets):
    problems = doc_commands.all_command_problems(snippets)
    assert not problems, _report(problems)


def test_stack_outputs_exist(snippets):
    assert {"uploadDataCommand", "logsCommand", "kubeconfig", "estimatedHourlyUsd", "jobSubmission",
            "ncclCheckCommand", "tensorboardCommand"} <= doc_stack.stack_outputs()
    problems = doc_stack.output_problems(snippets)
    assert not problems, _report(problems)


def test_config_keys_are_known(snippets):
    problems = doc_stack.config_problems(snippets) + doc_stack.yaml_block_problems()
    assert not problems, _report(problems)


def test_files_sections_and_anchors_exist(snippets):
    every_page = pages() + [p for p in REPO.glob("Pulumi.*.yaml")]
    problems = (doc_files.path_problems(snippets) + doc_files.section_problems(every_page)
                + doc_files.entrypoint_problems(pages()))
    assert not problems, _report(problems)


# ------------------------------------------------------------------ each kind of mistake is caught
def _page(tmp_path, text: str, name: str = "page.md") -> list[Snippet]:
    page = tmp_path / name
    page.write_text(text)
    return markdown_snippets(page)


def test_a_wrong_subcommand_flag_or_trainer_flag_is_caught(tmp_path):
    snippets = _page(tmp_path, "```bash\n"
                     ".venv/bin/python -m training train --data d --out r --preset tiny --max-step 5\n"
                     ".venv/bin/python -m training trian --data d\n"
                     ".venv/bin/trainstack submit exp1 --stack aws --pods 1:2 -- --max-steps 20 --learning-rate 3e-4\n"
                     ".venv/bin/trainstack lsit --stack aws\n"
                     ".venv/bin/python -m bench.recovery --quick --fastest\n"
                     "python -m bench.nothing_here\n"
                     "make tset\n"
                     "```\n"
                     "Run `python -m training sample runs/mine --promt hi` and `pip install 'trainstack[infra]'`.\n")
    problems = doc_commands.all_command_problems(snippets)
    text = "\n".join(problems)
    for expected in ("has no flag --max-step", "`python -m training trian`: no such command", "--learning-rate",
                     "`trainstack lsit`: no such command", "bench.recovery` has no flag --fastest",
                     "no module bench.nothing_here", "no target tset", "--promt", "on no package index"):
        assert expected in text, text
    assert len(problems) == 9, text


def test_the_documented_commands_themselves_pass(tmp_path):
    snippets = _page(tmp_path, "```bash\n"
                     ".venv/bin/python -m training train --data d --out r --preset tiny --max-steps=5 \\\n"
                     "    --no-progress  # a comment --not-a-flag\n"
                     "OMP_NUM_THREADS=1 python -m training.launch --nnodes 1 -m training train --data d --out r\n"
                     ".venv/bin/trainstack submit exp1 --stack aws -- --max-steps 2000 --lr 3e-4\n"
                     ".venv/bin/trainstack submit exp1 --stack aws --module my.mod -- --anything\n"
                     "eval \"$(pulumi stack output logsCommand)\" && make demo\n"
                     ".venv/bin/pip install -e '.[wandb]'\n"
                     "```\n")
    assert doc_commands.all_command_problems(snippets) == []


def test_a_bare_trainstack_command_in_the_readme_is_caught():
    snippet = Snippet(REPO / "README.md", 1, "trainstack list --stack aws", True, "bash")
    assert doc_commands.command_problems(snippet, page_is_readme=True) == [
        "README.md:1: a bare `trainstack` command: spell where it is, .venv/bin/trainstack"]


def test_a_missing_stack_output_is_caught(tmp_path):
    snippets = _page(tmp_path, "```bash\neval \"$(pulumi stack output uploadDataCommnd)\"\n"
                     "pulumi stack output --json --show-secrets --stack aws > outputs.json\n```\n")
    assert doc_stack.output_problems(snippets) == [
        f"{tmp_path / 'page.md'}:2: `pulumi stack output uploadDataCommnd`: no stack exports uploadDataCommnd"]


def test_an_unknown_config_key_is_caught(tmp_path):
    """Issue 30 item 1: GUARDRAILS.md told GCP users to set a key the program refuses."""
    snippets = _page(tmp_path, "Set `trainstack:deletionProtection: false` in a disposable stack, and\n"
                     "```bash\npulumi config set --path trainstack:job.enabled true\n"
                     "pulumi config set --path trainstack:job.nodesMaximum 3\n"
                     "pulumi config set trainstack:job.enabled true\n"
                     "pulumi config set --path 'trainstack:apiPublicAccessCidrs[0]' 203.0.113.7/32\n```\n")
    problems = doc_stack.config_problems(snippets)
    assert [p.split(": ", 1)[1].split(":")[0] for p in problems] == [
        "trainstack", "trainstack", "`pulumi config set trainstack"], problems
    assert "deletionProtection: trainstack:deletionProtection: unknown key" in problems[0]
    assert "job.nodesMaximum" in problems[1] and "unknown key" in problems[1]
    assert "add --path" in problems[2]


def test_an_unknown_key_in_a_yaml_block_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```yaml\ntrainstack:job:\n  train:\n    snapshotUri: s3://b/r\n  terminationGracePeriodSeconds: 600\n"
                    "```\n```yaml\ntrainstack:job:\n  secretEnv: [{name: WANDB_API_KEY, secretName: wandb, key: api-key}]\n```\n")
    problems = doc_stack.yaml_block_problems([page])
    assert len(problems) == 1 and "terminationGracePeriodSeconds" in problems[0] and ":2:" in problems[0], problems


def test_a_moved_file_or_section_is_caught(tmp_path):
    """Issue 30 item 3: the stack files pointed at README sections that had moved to docs/."""
    stack = tmp_path / "Pulumi.x.yaml"
    misspelt = "trainstack/infra/core/" + "verions.py"  # split: tests/test_references.py reads this file too
    stack.write_text('# Every key is in README.md, section "A3", and docs/aws.md#configuration-pulumiawsyaml\n'
                     f"# and docs/aws.md#configuraton, and `{misspelt}`\nconfig: {{}}\n")
    problems = doc_files.path_problems(stack_file_snippets(stack)) + doc_files.section_problems([stack])
    text = "\n".join(problems)
    assert f"{misspelt}: no such file" in text
    assert "docs/aws.md has no section #configuraton" in text
    assert 'README.md has no section "A3"' in text
    assert len(problems) == 3, text


def test_a_link_to_a_missing_anchor_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## The trainer on the cluster\nSee [here](#the-trainer-on-the-cluster), "
                    "[there](#nowhere) and [aws](../aws.md#nowhere).\n")
    (tmp_path.parent / "aws.md").write_text("# AWS\n")
    problems = doc_files.section_problems([page])
    assert len(problems) == 2 and "#nowhere" in problems[0], problems


def test_a_wrong_entrypoint_is_caught(tmp_path):
    """Issue 30 item 5: kubernetes.md said the image's entrypoint was torchrun."""
    page = tmp_path / "page.md"
    page.write_text("- **`images/Dockerfile`**: CUDA PyTorch, non-root, entrypoint `torchrun`.\n")
    assert doc_files.entrypoint_problems([page]) == [
        f"{page}: says the image's entrypoint is `torchrun`; images/Dockerfile: `python -m training.launch`"]
