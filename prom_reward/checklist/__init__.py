"""Checklist rewards (rubrics as rewards): a row's criteria (``criteria``) judged in one judge call (``judging``),
aggregated into one score (``aggregate``), with pass-rate diagnostics (``metrics``); docs/checklists.md."""
