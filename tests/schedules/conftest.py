from tests.runs.conftest import acme_on, alice, alice_person  # noqa: F401 - the runs' fixtures, for the schedules tests
