from tests.runs.conftest import acme_on, alice  # noqa: F401 - the runs' fixtures, for the credits' tests
