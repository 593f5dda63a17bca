"""`python -m backend.injection.evaluate`: the public evaluation harness (see harness/evaluate.py)."""

from backend.injection.harness.evaluate import main

if __name__ == "__main__":
    main()
