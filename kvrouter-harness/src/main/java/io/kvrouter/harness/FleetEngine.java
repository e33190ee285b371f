package io.kvrouter.harness;

import io.kvrouter.mockengine.MockEngineServer;

/**
 * A mock engine of {@code bench fleet}'s fleet, in this JVM ({@link InProcess}) or a child JVM
 * ({@link ChildEngine}): its HTTP base URL, its KV event and replay ZMQ endpoints, its process.
 * Every address is the one the engine bound (it binds port 0 and {@code tcp://127.0.0.1:*}), never
 * a guessed one.
 */
interface FleetEngine extends AutoCloseable {
  String url();

  String events();

  String replay();

  /** The process id (this JVM's for an in-process engine). */
  long pid();

  @Override
  void close();

  /** An engine in this JVM. */
  record InProcess(MockEngineServer s) implements FleetEngine {
    @Override
    public String url() {
      return s.url();
    }

    @Override
    public String events() {
      return s.zmqEndpoint();
    }

    @Override
    public String replay() {
      return s.replayEndpoint();
    }

    @Override
    public long pid() {
      return ProcessHandle.current().pid();
    }

    @Override
    public void close() {
      s.close();
    }
  }
}
