"""llama.cpp's own reading of an ``-ot`` pattern, as an oracle for tests: ``std::regex(pattern)`` then
``std::regex_search(tensor_name, pattern)``, compiled with g++ once per test session.

:func:`verdicts` returns, per pattern, the match bits over the names ("1" where std::regex finds the
pattern), or ``ERR`` (std::regex refuses it), ``HANG`` (over 2 s) or ``CRASH``. Each pattern runs in a
child process, so a catastrophic one cannot stop the others.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import pytest

SOURCE = r"""
#include <csignal>
#include <cstdio>
#include <iostream>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
// Line 1: number of patterns; then the patterns; then the names. For each pattern one line: the match bits
// (llama.cpp's std::regex(pattern) + regex_search), ERR (regex_error), HANG (over 2 s) or CRASH. Each
// pattern runs in a child process, so a catastrophic one cannot stop the others.
int main() {
    std::string line;
    std::getline(std::cin, line);
    int np = std::stoi(line);
    std::vector<std::string> pats, names;
    for (int i = 0; i < np; i++) { std::getline(std::cin, line); pats.push_back(line); }
    while (std::getline(std::cin, line)) names.push_back(line);
    for (auto &ps : pats) {
        int fd[2];
        if (pipe(fd) != 0) return 2;
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            alarm(2);
            std::string out;
            try {
                std::regex p(ps);
                for (auto &n : names) out += std::regex_search(n, p) ? '1' : '0';
            } catch (std::regex_error &) { out = "ERR"; }
            if (write(fd[1], out.data(), out.size()) < 0) _exit(3);
            _exit(0);
        }
        close(fd[1]);
        std::string out;
        char buf[4096];
        ssize_t k;
        while ((k = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, k);
        close(fd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) out = WTERMSIG(status) == SIGALRM ? "HANG" : "CRASH";
        std::cout << (out.empty() ? "-" : out) << '\n';
    }
}
"""


@cache
def executable() -> str:
    """The compiled oracle (skips the calling test where there is no g++)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    d = Path(tempfile.mkdtemp(prefix="layerdeck-stdregex-"))
    (d / "each.cpp").write_text(SOURCE)
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(d / "each"), str(d / "each.cpp")], check=True, timeout=300)
    return str(d / "each")


def verdicts(patterns: list[str], names: list[str], timeout: float = 600) -> list[str]:
    """One verdict per pattern (patterns and names must not contain newlines)."""
    stdin = "\n".join([str(len(patterns)), *patterns, *names]) + "\n"
    proc = subprocess.run([executable()], input=stdin.encode(), capture_output=True, timeout=timeout, check=True)
    rows = proc.stdout.decode().split("\n")[: len(patterns)]
    assert len(rows) == len(patterns), proc.stdout[-500:]
    return rows


def assert_reads_like_std_regex(pattern: str, cpp: str, names: list[str]) -> None:
    """An accepted pattern finds exactly what std::regex finds, through every engine Layerdeck uses."""
    from app.memory.ecmascript import compile_pattern, name_bytes
    from app.memory.layout import OverrideMatcher

    assert cpp not in ("ERR", "HANG", "CRASH"), f"llama.cpp: {cpp}; Layerdeck accepted {pattern!r}"
    c = compile_pattern(pattern)
    encoded = [name_bytes(n) for n in names]
    assert "".join("1" if c.rx.search(n) else "0" for n in encoded) == cpp, pattern
    if c.fast is not None:
        assert "".join("1" if c.fast.search(n) else "0" for n in encoded) == cpp, pattern
    hits = OverrideMatcher(names).matches(pattern)  # with its literal prefilter
    assert "".join("1" if i in hits else "0" for i in range(len(names))) == cpp, pattern
