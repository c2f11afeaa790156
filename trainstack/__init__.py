"""trainstack: the library's import root. `trainstack.jobs` is the job CLI (`trainstack submit|list|...`)."""
