"""The runs' fixtures: alice, alice_person and acme_on are the whole suite's (tests/conftest.py)."""
