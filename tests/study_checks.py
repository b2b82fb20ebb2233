"""The tests' check of a study's answers as a grader's page shows them (imported by test_memory, test_lab5,
test_dataloading, test_tinyimagenet, test_questions): the record builds (answers.check: every number tagged,
each name once) and the claims check (report/claims.py) finds nothing in any prose field the page shows: every
digit in a <span data-number> slot that prints fmt() of its Number, a direction word only inside a verdict's
statement, a measured Number with its n, a background without a number; and every headline is read in one
breath (claims.headline_problems: the verdict in words, at most one number)."""

from hpml_lab.answers import Record, check
from hpml_lab.report import claims


def holds(answers, task: str = "study") -> None:
    check(Record(task, "t", answers))
    problems = [p for a in answers for p in claims.check_answer(a.as_dict(), f"{task}: ")]
    rec = Record(task, "t", answers).as_dict()
    numbers = claims.record_numbers(rec)
    problems += [p for a in rec["answers"] for p in claims.headline_problems(a, numbers, f"{task}: ")]
    assert problems == [], problems
