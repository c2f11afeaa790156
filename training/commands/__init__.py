"""The other commands of `python -m training`: sample, evaluate, report, bench and demo."""
