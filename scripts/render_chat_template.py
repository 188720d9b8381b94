#!/usr/bin/python3
"""Renders chat conversations with the real Jinja template of a model's
tokenizer_config.json, the way Hugging Face transformers' apply_chat_template
renders it, to give q3c's native chat template its expected output.

transformers is not packaged in Debian, so this sets up the same Jinja
environment it builds (transformers/utils/chat_template_utils.py): a sandboxed
environment with trim_blocks, lstrip_blocks and the loopcontrols extension, and
its own `tojson` filter (json.dumps with ensure_ascii=False: Jinja's built-in
one escapes HTML characters and sorts keys, which transformers avoids).
Variables: messages, tools (when given), add_generation_prompt, and
enable_thinking only when the case sets it (the template tests `is defined`).

Needs Debian's python3-jinja2.

  /usr/bin/python3 scripts/render_chat_template.py models/qwen3-tokenizer/tokenizer_config.json \\
      tests/text/data/chat_cases.json tests/text/data/chat_expected.json
"""
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def load_template(config_path):
    """The chat template of tokenizer_config.json, compiled as transformers
    compiles it (sandboxed, trim/lstrip blocks, loop controls)."""
    with open(config_path, encoding="utf-8") as f:
        source = json.load(f)["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def main():
    config_path, cases_path, out_path = sys.argv[1:4]
    template = load_template(config_path)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    rendered = []
    for case in cases:
        variables = {"messages": case["messages"],
                     "add_generation_prompt": case.get("add_generation_prompt", False)}
        if "tools" in case:
            variables["tools"] = case["tools"]
        if "enable_thinking" in case:
            variables["enable_thinking"] = case["enable_thinking"]
        rendered.append({"name": case["name"], "text": template.render(**variables)})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(rendered, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(rendered)} conversations rendered with Jinja {jinja2.__version__} -> {out_path}")


if __name__ == "__main__":
    main()
