"""The hacking probe: how exploitable is a judge as a reward, before you train on it? ``prom-reward probe`` runs
it (docs/hacking.md)."""
