"""A small real CMake project for the build tests: C files that compile in a moment and, optionally, a step that
sleeps, so a build can be watched and cancelled mid-way. Its targets carry the names of the tools the builder
asks for (``llama-server`` ...), so :mod:`app.llamacpp.build` drives it exactly as it drives llama.cpp."""

from __future__ import annotations

from pathlib import Path

TOOLS = ("llama-server", "llama-fit-params", "llama-bench", "ggml-rpc-server")


def write_project(src: Path, n_files: int = 12, sleep_s: int = 0, targets: tuple[str, ...] = TOOLS) -> Path:
    """Write the project into ``src``: ``parts`` (a static library of ``n_files`` C files) and one target per name.

    With ``sleep_s`` the first target also runs ``sleep`` (a child of make, as a compiler would be), after
    ``parts`` is built.
    """
    src.mkdir(parents=True, exist_ok=True)
    (src / "gen").mkdir(exist_ok=True)
    for i in range(n_files):
        (src / "gen" / f"f{i}.c").write_text(f"int f{i}(int x) {{ return x * {i + 1}; }}\n")
    (src / "main.c").write_text("int f0(int);\nint main(void) { return f0(0); }\n")
    lines = [
        "cmake_minimum_required(VERSION 3.16)",
        "project(layerdeck_build_test C)",
        "file(GLOB PARTS ${CMAKE_SOURCE_DIR}/gen/*.c)",
        "add_library(parts STATIC ${PARTS})",
    ]
    for k, name in enumerate(targets):
        if k == 0 and sleep_s:
            lines += [
                f"add_custom_command(OUTPUT slow.stamp COMMAND sleep {sleep_s} COMMAND ${{CMAKE_COMMAND}} -E touch "
                "slow.stamp COMMENT \"slow step\")",
                "add_custom_target(slow_step DEPENDS slow.stamp)",
                "add_dependencies(slow_step parts)",  # the sleep comes after the library: mid-way, not at the start
            ]
        lines.append(f"add_executable({name} main.c)")
        lines.append(f"target_link_libraries({name} parts)")
        lines.append(f"set_target_properties({name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${{CMAKE_BINARY_DIR}}/bin)")
        if k == 0 and sleep_s:
            lines.append(f"add_dependencies({name} slow_step)")
    (src / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    return src
