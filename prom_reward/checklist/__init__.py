"""Checklist rewards (rubrics as rewards): a row's own list of criteria, judged and aggregated into one score.

``criteria`` parses and validates a row's checklist (strings or ``{criterion, weight, category, rubric}``
mappings; categories essential, important, optional, pitfall) and renders a criterion without a rubric as a
binary satisfied/not rubric on the judge format's scale; ``aggregate`` turns per-criterion scores into one
reward (weighted mean, minimum, essential gate, a custom callable); ``judging`` judges a batch of
(response, checklist) in one judge call (explicit: one judgment per distinct (response, criterion);
implicit: the whole checklist as one rubric); ``metrics`` gives per-criterion and per-category pass rates.
docs/checklists.md has the formulas.
"""
