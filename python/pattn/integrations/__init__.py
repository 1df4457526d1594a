"""pattn inside other frameworks.

* :mod:`pattn.integrations.transformers`: Hugging Face transformers'
  ``generate()`` on pattn caches (a ``Cache`` subclass and the ``"pattn"``
  attention implementation), and continuous batching (``"paged|pattn"``,
  :mod:`pattn.integrations.transformers_batching`).

Each imports its framework only when used, so ``import pattn`` and these
modules work without them.
"""
