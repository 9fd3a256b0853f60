"""llama.cpp command lines, driven by one flag table.

- :mod:`.flags` — the table: every llama.cpp option with its spellings,
  value, ``LLAMA_ARG_*`` variable, effect, tools and validation.
- :mod:`.values` — the validating converters the table names (llama.cpp's
  limits and messages), :class:`~.values.ArgsError`, the ``-cmoe``/``-ncmoe``
  override patterns.
- :mod:`.parse` — a command line (and its environment) into
  :class:`~app.memory.settings.LlamaSettings`.
- :mod:`.argv` — find a flag or its value in an argument list.
- :mod:`.accepts` — which spelling a build accepts (table against ``--help``).
- :mod:`.spec` — :class:`~.spec.PlacementArgs`, the placement part of a
  command, and :class:`~.spec.InexpressibleError`.
- :mod:`.build` — argv for llama-server, llama-cli or llama-bench.
- :mod:`.formats` — shells, environment form, llama-swap, Ollama, JSON, and
  pasted text back; :mod:`.shells` quotes per shell; :mod:`.ot_patterns`
  writes short exact ``-ot`` regexes.

Layering: this package sits below :mod:`app.placement` and imports none of
placement, speed, launch, session or cli; it never sees a ``Placement``
(:func:`app.placement.command.build_command` is the placement-level front).
"""
