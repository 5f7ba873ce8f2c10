"""A warm local engine: one Spark JVM kept running between commands, reached over Spark Connect.

Starting a JVM costs most of the time of a small command (``sql`` over three rows, a plan with one
changed query). With the warm engine, the first command that needs Spark starts a *server process*
(:func:`.server.serve`, a detached Python process holding one classic local SparkSession) and every later
command reuses it, until it has been idle for a while. The server offers two things, both bound to
this machine only:

- a **Spark Connect** endpoint on ``127.0.0.1`` (an ephemeral port, a random bearer token), for the
  trusted work of ``ingest`` and ``test``;
- a **Unix socket** (in a folder only this user may enter) on which it answers requests it runs itself
  on its classic session, exactly as a cold command would in its own JVM: the *checks* (the query
  analysis of ``plan`` and the sandbox check every Connect query passes first), each in a child
  session with the analysis sandbox's settings (``engine.settings.analysis_settings``), so nothing a
  manifest names runs; ``sql`` whole; and ``run`` whole, as a *streaming* request (:func:`.client.stream`): the
  server sends messages (the run's events) while it works, and the caller sends interrupts back (a
  first Ctrl-C, a second, or its going away). Results are the same by construction.

Which request the socket answers is the caller's choice (:func:`.server.serve` takes the handlers); the
messages are pickled, which is sound because only this user can reach the socket, and both ends are
the same installation (the folder is per Python environment and PySpark version, see
:func:`.choice.engine_dir`).

Life cycle, all in :class:`.lifecycle.WarmEngine`:

- ``start.lock`` (an exclusive ``flock``) is held while a command looks for the server and, if none is
  alive, starts one and waits until it is ready; so two commands never start two servers.
- ``use.lock`` is held *shared* by every command using the server, for as long as it does; the server
  stops itself only when it can take it *exclusively* (no command is using it) and nothing touched
  ``used`` for the idle timeout. Locks die with their process, so a killed command never keeps the
  server up, and Ctrl-C needs no clean-up.
- ``server.json`` says where it is (pid, port, token, socket), written atomically once it is ready. A
  file whose process is gone, or that does not answer, is stale: it is removed (and the process group
  ended, once its command line proves it is ours) before a new server starts.
- The JVM is a child of the server process, which PySpark's gateway ends when its parent dies.

``CI`` set turns it off unless asked for; ``ODFPROJ_WARM_ENGINE`` or ``--warm``/``--cold`` decide.

The package is split by role, one module each: :mod:`.choice` (whether a command uses it, and
whether a target fits it), :mod:`.lifecycle` (a command finding, starting, leasing and stopping the
server), :mod:`.client` (a command's requests, and a Connect session on the server), :mod:`.server`
(what runs inside the server process), and :mod:`.protocol` (the record and the socket's frames both
ends share). The requests themselves are their layers': ``plan.served_checks`` (the plan's
checks and ``sql``), ``run.warm_run`` (``run``), assembled by the entry point ``run.warm_server``.
"""
