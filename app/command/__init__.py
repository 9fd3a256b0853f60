"""llama.cpp command lines, driven by one flag table.

- :mod:`.flags` — the table: every llama.cpp option with its spellings,
  value, ``LLAMA_ARG_*`` variable, effect, tools and validation.
- :mod:`.values` — the validating converters the table names (llama.cpp's
  limits and messages: 32-bit ``std::stoi``, ``LLAMA_MAX_SEQ``,
  ``llama_max_devices``, ``-ncmoe`` clamped to ``LLAMA_MAX_LAYERS``),
  :class:`~.values.ArgsError`, the ``-cmoe``/``-ncmoe`` override patterns, and
  :func:`~.values.check_settings`, the one check of a whole
  :class:`~app.memory.settings.LlamaSettings` (every parse ends with it).
- :mod:`.parse` — a command line (and its environment) into
  :class:`~app.memory.settings.LlamaSettings`.
- :mod:`.argv` — find a flag or its value in an argument list;
  :func:`~.argv.mask_secrets` for logs and displays (the table's ``secret`` rows).
- :mod:`.accepts` — which spelling a build accepts (table against ``--help``).
- :mod:`.spec` — :class:`~.spec.PlacementArgs`, the placement part of a
  command, and :class:`~.spec.InexpressibleError`.
- :mod:`.build` — argv for llama-server, llama-cli or llama-bench.
- :mod:`.formats` — shells (``cmd`` for the prompt, ``cmd-batch`` for a
  ``.cmd`` file), environment form, llama-swap, Ollama, JSON, and pasted text
  back; :mod:`.shells` quotes per shell (what a shell cannot carry is a
  :class:`~.shells.QuoteError`); :mod:`.ot_patterns` writes short exact
  ``-ot`` regexes and checks them as the estimator reads them
  (:mod:`app.memory.ecmascript`: ``std::regex`` semantics, time-bounded).

Layering: this package sits below :mod:`app.placement` and imports none of
placement, speed, launch, session or cli; it never sees a ``Placement``
(:func:`app.placement.command.build_command` is the placement-level front).
"""
