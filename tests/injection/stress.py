"""A large benign stress set drawn from Faker (dev dependency): company names, slogans, jobs, addresses and
word-salad sentences in English, German, Spanish and French. Not realistic business notes, but many
thousands of distinct ordinary phrases; every finding here is a false positive to look at.
"""

from __future__ import annotations

from backend.injection_training.regression.corpus import Example, LabelledRow

HEADER = ["id", "company", "slogan", "contact", "job", "address", "notes"]


def stress_rows(n_per_locale: int = 2500, seed: int = 77) -> list[LabelledRow]:
    import faker  # imported here: the rest of the suite must not need it

    rows: list[LabelledRow] = []
    for locale in ("en_US", "de_DE", "es_ES", "fr_FR"):
        fake = faker.Faker(locale)
        fake.seed_instance(seed)
        for i in range(n_per_locale):
            notes = fake.paragraph(nb_sentences=2) if i % 2 else fake.sentence(nb_words=10)
            row = [
                str(i),
                fake.company(),
                fake.catch_phrase(),
                f"{fake.name()} <{fake.email()}>",
                fake.job(),
                fake.address().replace("\n", ", "),
                notes,
            ]
            rows.append(
                LabelledRow(HEADER, row, Example(text=notes, positive=False, source=f"faker-{locale}"))
            )
    return rows
