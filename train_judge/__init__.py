"""Training Prometheus-style judges: data builders (``data``, ``pocket``, ``examples``), SFT (``sft``)
with YAML configs (``config``, ``configs/``), weight merging of experts (``merge``), evaluation of the
trained judges (``evaluate``) and shipping a small adapter (``ship``)."""
