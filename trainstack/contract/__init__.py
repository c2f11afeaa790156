"""The torch-free contract: the command-line parser and its types, model shapes, errors, log lines.

The only part of training/ that trainstack/infra/ (the Pulumi program, run without torch) may import.
"""
