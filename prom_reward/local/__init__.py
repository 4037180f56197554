"""Running on one machine without a model hub: CPU defaults for vLLM, local models, the pocket judge's folder
(imports nothing of prom_reward but ``errors``)."""
