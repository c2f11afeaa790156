"""`python -m trainstack` = the `trainstack` console script."""

from trainstack.jobs.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
