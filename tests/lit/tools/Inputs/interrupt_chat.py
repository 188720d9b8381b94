#!/usr/bin/env python3
"""interrupt_chat.py Q3RUN ARTIFACT WEIGHTS: Ctrl-C in `q3run chat`, as a user
presses it (SIGINT to the process), while an answer streams.

1. One Ctrl-C stops the answer, the stats line says so, and the chat takes the
   next message (answered, then stopped the same way); /exit ends it with 0.
2. Ctrl-C at the prompt (stdin still open) ends the chat with 0.
Prints one line per observation for FileCheck. An answer runs to 100000
tokens (minutes) unless stopped, so a missing stop is a timeout, not a pass.
"""
import os
import select
import signal
import subprocess
import sys
import threading
import time

q3run, artifact, weights = sys.argv[1:4]
# --no-think: the answer is printed (thinking would be hidden), so its first
# bytes on stdout say that generation is under way.
command = [q3run, "chat", artifact, "--weights", weights, "-n", "100000", "--greedy",
           "--no-think", "--ctx", "20000", "--threads", "1"]


class Chat:
    def __init__(self):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.printed = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.drain, daemon=True).start()

    def drain(self):
        # Read everything the answer prints, so a full pipe never blocks it.
        fd = self.process.stdout.fileno()
        while True:
            select.select([fd], [], [])
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            with self.lock:
                self.printed += len(chunk)

    def ask(self, message):
        with self.lock:
            before = self.printed
        self.process.stdin.write(message + "\n")
        self.process.stdin.flush()
        deadline = time.time() + 60
        while time.time() < deadline:
            with self.lock:
                if self.printed > before:
                    return
            time.sleep(0.05)
        sys.exit("no answer printed within 60 s")


def stats_line(chat):
    deadline = time.time() + 60
    while time.time() < deadline:
        line = chat.process.stderr.readline()
        if not line:
            break
        if "stopped:" in line:
            return line.strip()
    sys.exit("no stats line within 60 s of Ctrl-C")


chat = Chat()
for turn in ("Tell me a long story.", "And another one."):
    chat.ask(turn)
    chat.process.send_signal(signal.SIGINT)
    line = stats_line(chat)
    print("turn:", line[line.index("stopped:"):])
chat.process.stdin.write("/exit\n")
chat.process.stdin.close()
print("exit:", chat.process.wait(timeout=60))

chat = Chat()
chat.ask("Tell me a long story.")
chat.process.send_signal(signal.SIGINT)
stats_line(chat)
time.sleep(0.5)  # back at the prompt, waiting for a line (stdin stays open)
chat.process.send_signal(signal.SIGINT)
print("Ctrl-C at the prompt: exit", chat.process.wait(timeout=60))
