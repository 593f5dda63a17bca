"""Companies, users, teams, dataset permissions, sessions and API tokens."""
