#!/usr/bin/python3
"""Differential test of q3c's native chat template on random conversations:
renders each with the real Jinja template (as scripts/render_chat_template.py
does, Debian's python3-jinja2) and with `q3run template`, and reports the
first differences. Exit code 1 if any.

  /usr/bin/python3 scripts/chat_template_compare.py build/tools/q3run/q3run \\
      models/qwen3-tokenizer/tokenizer_config.json [COUNT] [SEED]
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_chat_template import load_template  # noqa: E402


WORDS = ["hello", "Why", "sky", "blue", "\n", "\n\n", " ", "<think>", "</think>", "42", "ünï",
         "日本", "<tool_response>", "</tool_response>", "{\"a\": 1}", "\t", "é", "😀", ""]


def text(rng):
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))


def arguments(rng):
    if rng.random() < 0.3:
        return json.dumps({"x": rng.randint(0, 9)})
    return {"q": text(rng), "n": rng.choice([1, 2.5, -0.0, 1e20, None, True, [1, "a"]]),
            "nested": {"k": text(rng)}}


def tool_call(rng):
    body = {"name": rng.choice(["f", "get_weather", "ß"]), "arguments": arguments(rng)}
    return {"type": "function", "function": body} if rng.random() < 0.7 else body


def message(rng, role):
    m = {"role": role, "content": text(rng)}
    if rng.random() < 0.3 and role == "user":
        m["content"] = "<tool_response>" + text(rng) + "</tool_response>"
    if role == "assistant":
        if rng.random() < 0.4:
            m["content"] = text(rng) + "<think>" + text(rng) + "</think>" + text(rng)
        if rng.random() < 0.2:
            m["reasoning_content"] = rng.choice([None, text(rng)])
        if rng.random() < 0.3:
            m["tool_calls"] = [tool_call(rng) for _ in range(rng.randint(0, 3))]
    return m


def conversation(rng):
    roles = ["system"] if rng.random() < 0.5 else []
    roles += [rng.choice(["user", "assistant", "tool", "system"]) for _ in range(rng.randint(1, 7))]
    case = {"messages": [message(rng, role) for role in roles]}
    if rng.random() < 0.4:
        case["tools"] = [{"type": "function", "function": {"name": "t%d" % i, "description": text(rng),
                          "parameters": {"type": "object", "properties": {}}}}
                         for i in range(rng.randint(0, 2))]
    return case


def main():
    q3run, config_path = sys.argv[1:3]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    template = load_template(config_path)
    rng = random.Random(seed)
    mismatches = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.json")
        for i in range(count):
            case = conversation(rng)
            generation = rng.random() < 0.7
            thinking = rng.choice([None, True, False])
            variables = dict(case, add_generation_prompt=generation)
            if thinking is not None:
                variables["enable_thinking"] = thinking
            expected = template.render(**variables)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(case, f, ensure_ascii=False)
            flags = [] if generation else ["--no-generation-prompt"]
            if thinking is False:
                flags.append("--no-think")
            got = subprocess.run([q3run, "template", "--messages", path] + flags,
                                 capture_output=True).stdout.decode("utf-8")
            if got != expected:
                mismatches += 1
                if mismatches <= 5:
                    print(f"case {i}: {json.dumps(variables, ensure_ascii=False)}\n"
                          f"  jinja {expected!r}\n  q3run {got!r}")
    print(f"{count} random conversations (seed {seed}): {mismatches} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
