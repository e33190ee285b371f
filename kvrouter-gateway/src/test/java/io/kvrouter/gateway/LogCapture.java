package io.kvrouter.gateway;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The messages a {@link Logger} publishes while this is open, for tests that check a warning; any
 * thread may log, the test reads {@link #messages()}.
 */
final class LogCapture implements AutoCloseable {
  private final Logger log;
  private final List<String> messages = new ArrayList<>();
  private final Handler handler =
      new Handler() {
        @Override
        public void publish(LogRecord r) {
          synchronized (messages) {
            messages.add(r.getMessage());
          }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  LogCapture(Logger log) {
    this.log = log;
    log.addHandler(handler);
  }

  /** The messages so far, oldest first. */
  List<String> messages() {
    synchronized (messages) {
      return Collections.unmodifiableList(new ArrayList<>(messages));
    }
  }

  @Override
  public void close() {
    log.removeHandler(handler);
  }
}
