package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The uncaught-exception handler of {@link OutOfMemoryExit}, with a halt that only records. */
class OutOfMemoryExitTest {
  @Test
  void anOutOfMemoryErrorHaltsWithStatus3AndOtherErrorsGoToTheNextHandler() {
    List<Integer> halts = new ArrayList<>();
    List<Throwable> passedOn = new ArrayList<>();
    Thread.UncaughtExceptionHandler h =
        OutOfMemoryExit.handler((t, e) -> passedOn.add(e), halts::add);
    Thread t = new Thread(() -> {});
    IllegalStateException other = new IllegalStateException("not memory");
    h.uncaughtException(t, other);
    assertThat(halts).isEmpty();
    assertThat(passedOn).containsExactly(other);
    h.uncaughtException(t, new OutOfMemoryError("Java heap space"));
    assertThat(halts).containsExactly(OutOfMemoryExit.EXIT_CODE);
    assertThat(passedOn).containsExactly(other);
  }
}
