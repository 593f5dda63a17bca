"""The reviewer's questions the audit trail answers: entries filtered by person, run, flow, dataset, action
and date; one run's timeline; reports (approved despite a warning, follow-ups nobody reviewed, items accepted
and rejection rate per person). For a company admin or an auditor, of their own company only."""
