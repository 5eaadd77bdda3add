"""What a person reads: the terminal summary (``summary``, ``drain_terminal``), the JSON document
(``json_doc``) and the HTML report (``html``, with ``charts``, ``style`` and one module per section).
Reports read the engine's results and the what-ifs' answers; nothing below imports them."""
