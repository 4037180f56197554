"""Wire formats: how a system prompt and a filled template reach the judge model: ``chat`` (the tokenizer's chat
template), ``inst`` (literal ``[INST] ... [/INST]``) or ``raw``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prom_reward.errors import ConfigError
from prom_reward.format.templates import fill
from prom_reward.registry import Registry

_PROBE_SYSTEM = "PROM_REWARD_SYSTEM_PROBE"


def fold_system(system: str, user: str) -> str:
    """The Prometheus 2 training form of one user turn: ``system + "\\n\\n" + user``."""
    return f"{system}\n\n{user}" if system else user


def template_accepts_system(tokenizer: Any) -> bool:
    """True when ``tokenizer``'s chat template renders a system message (Mistral v0.2's raises on one)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return False
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "system", "content": _PROBE_SYSTEM}, {"role": "user", "content": "x"}],
            tokenize=False,
            add_generation_prompt=True,
        )
    except Exception:  # jinja raise_exception, TemplateError, ...
        return False
    return _PROBE_SYSTEM in str(text)


@dataclass(frozen=True)
class WireFormat:
    """``render`` gives completion text (``text``'s form of ``{system}`` and ``{user}``; the tokenizer's chat
    template when ``uses_chat_template``: its output holds BOS etc., tokenized without adding them), ``messages``
    chat messages (``sends_system`` False: the user message alone)."""

    name: str
    text: str = "{user}"
    sends_system: bool = True
    uses_chat_template: bool = False

    def render(self, system: str, user: str, tokenizer: Any = None, *, system_role: bool | None = None) -> str:
        if not self.uses_chat_template:
            return fill(self.text, {"system": system, "user": user})
        if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                "wire format 'chat' needs a tokenizer with a chat template, but "
                f"{'no tokenizer' if tokenizer is None else 'the tokenizer has no chat_template'} was given; "
                "use wire='inst' or wire='raw', or load a model whose tokenizer defines a chat template"
            )
        if system_role is None:
            system_role = template_accepts_system(tokenizer)
        msgs = self.messages(system, user, system_role=system_role)
        return str(tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))

    def messages(self, system: str, user: str, *, system_role: bool) -> list[dict[str, str]]:
        """Chat messages for an OpenAI-compatible chat endpoint."""
        if not self.sends_system:
            return [{"role": "user", "content": user}]
        if system_role and system:
            return [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return [{"role": "user", "content": fold_system(system, user)}]


WIRE_FORMATS: Registry[WireFormat] = Registry("wire format")
for _w in (
    WireFormat("chat", uses_chat_template=True),  # the tokenizer's own, system folded in when it has no system role
    WireFormat("inst", "[INST] {system}\n{user} [/INST]"),  # the public Prometheus vLLM form
    WireFormat("raw", sends_system=False),  # the filled template alone, as completion text; no system prompt
):
    WIRE_FORMATS.register(_w.name, _w)


def get_wire_format(wire: str | WireFormat) -> WireFormat:
    """Look a wire format up by name (``chat``, ``inst``, ``raw``) or pass one through."""
    if isinstance(wire, WireFormat):
        return wire
    return WIRE_FORMATS.get(wire)
