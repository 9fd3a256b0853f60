"""One module per architecture for :mod:`tests.gguf_factory`: each writes that architecture's tensors and keys
(as ``llama-model.cpp``'s ``load_arch_tensors`` / ``load_arch_hparams`` read them) and calls
:func:`tests.gguf_factory.register` with its tiny and full-size (sparse) hyperparameters."""
