#!/usr/bin/env bash
# The library tests against a built wheel, as a user gets it (.github/workflows/release.yml; docs/releasing.md).
#
# A clean virtualenv holds the wheel with its [infra] extra, resolved against the program's lock
# (requirements.txt), plus the test runner; the tests run from a copy of the checkout without the package's
# sources (trainstack/, training/), so every `import trainstack` is the wheel's (tests/library/test_install.py
# checks that when TRAINSTACK_UNDER_TEST=wheel). The tests that build the package from its sources, or compare
# the checkout's own files with the package, need the checkout and are left out with -m "not source_tree".
#
# Usage: .github/release/test-wheel.sh <folder holding the wheel> [work folder]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dist=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
wheels=("$dist"/trainstack-*-py3-none-any.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "expected one trainstack wheel in $dist" >&2; exit 2; }

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check -r "$repo/requirements.txt" \
    "${wheels[0]}[infra]" "pytest>=8" "pytest-timeout>=2.3"
"$work/venv/bin/python" -m pip check

mkdir -p "$work/tree"
tar -C "$repo" --exclude=./.git --exclude='./.venv*' --exclude=./venv --exclude=./policy/venv \
    --exclude=./.pytest_cache --exclude=./build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=./trainstack --exclude=./training -cf - . | tar -C "$work/tree" -xf -
# Left out besides -m "not source_tree", each for needing the checkout itself: the whole stacks build the training
# image from the checkout's images/ (a wheel refuses them by design: test_install.py checks that refusal);
# the plugin runs from a checkout's provider/ folder; test_schema.py compares `make schema`'s output file,
# which lives in a checkout (test_install.py checks the wheel's provider serves the committed schema.json).
checkout_only=(
    --ignore=tests/library/test_schema.py
    --deselect "tests/library/test_facades.py::test_hosted_stack_builds_the_same_graph_as_the_program"
    --deselect "tests/library/test_facades.py::test_hosted_aws_stack_builds_the_efa_stacks_graph_too"
    --deselect "tests/library/test_examples.py::test_python_example_builds_the_stack_in_the_existing_vpc_under_mocks"
    --deselect "tests/library/test_examples.py::test_yaml_example_and_docs_snippet_construct_as_sent_over_the_wire"
    --deselect "tests/library/test_provider_process.py::test_the_plugin_entry_point_serves_the_committed_schema"
)
cd "$work/tree"
TRAINSTACK_UNDER_TEST=wheel TRAINSTACK_WHEEL="${wheels[0]}" "$work/venv/bin/python" -m pytest -q -m "not source_tree" \
    "${checkout_only[@]}" tests/library
