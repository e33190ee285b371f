package io.kvrouter.cli;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandleProxies;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;

/**
 * SIGTERM and SIGINT (Ctrl-C) as a request to stop: {@code serve} and {@code gateway} wait in
 * {@link #await()}, stop gracefully on their own thread and return 0, so the process exits 0, as
 * Kubernetes and systemd expect of a clean stop. A second signal while stopping ends the process at
 * once with 128 + the signal's number (143, 130).
 *
 * <pre>
 * Implementation notes
 *
 * The JVM's own handling of SIGTERM and SIGINT runs the shutdown hooks and then exits with 143 or
 * 130 whatever the hooks do (System.exit from a hook blocks). The only way the JDK offers to
 * handle the signals instead is sun.misc.Signal (module jdk.unsupported, exported, available with
 * --release 21). It is called through method handles, looked up by name once in install(), and the
 * handler is a MethodHandleProxies instance of sun.misc.SignalHandler: javac warns at every use of
 * an internal API named in source, a warning no @SuppressWarnings silences, and the build fails
 * on warnings (docs/static-analysis.md). install() replaces the JVM's handlers for
 * the process; the handler runs on a thread the JVM starts per signal: the first signal records
 * its name and counts the latch down, a later one halts (Runtime.halt: no hooks, the graceful
 * stop in progress is abandoned). received is written by the first handler before the countdown
 * and read after await() returns (the latch orders them).
 * </pre>
 */
final class Signals {
  private final CountDownLatch first = new CountDownLatch(1);
  private final MethodHandle nameOf; // Signal.getName(), as (Object)String
  private final MethodHandle numberOf; // Signal.getNumber(), as (Object)int
  private volatile String received;

  private Signals(MethodHandle nameOf, MethodHandle numberOf) {
    this.nameOf = nameOf;
    this.numberOf = numberOf;
  }

  /** Takes over SIGTERM and SIGINT for the rest of the process's life. */
  static Signals install() {
    try {
      Class<?> signalType = Class.forName("sun.misc.Signal");
      Class<?> handlerType = Class.forName("sun.misc.SignalHandler");
      MethodHandles.Lookup pub = MethodHandles.publicLookup();
      MethodHandle newSignal =
          pub.findConstructor(signalType, MethodType.methodType(void.class, String.class));
      MethodHandle handle =
          pub.findStatic(
              signalType, "handle", MethodType.methodType(handlerType, signalType, handlerType));
      Signals s =
          new Signals(
              pub.findVirtual(signalType, "getName", MethodType.methodType(String.class))
                  .asType(MethodType.methodType(String.class, Object.class)),
              pub.findVirtual(signalType, "getNumber", MethodType.methodType(int.class))
                  .asType(MethodType.methodType(int.class, Object.class)));
      Consumer<Object> onSignal = s::handle;
      MethodHandle accept =
          pub.findVirtual(Consumer.class, "accept", MethodType.methodType(void.class, Object.class))
              .bindTo(onSignal);
      Object handler = MethodHandleProxies.asInterfaceInstance(handlerType, accept);
      for (String name : new String[] {"TERM", "INT"}) {
        handle.invoke(newSignal.invoke(name), handler);
      }
      return s;
    } catch (ReflectiveOperationException e) {
      throw new LinkageError("sun.misc.Signal is not available: " + e, e);
    } catch (RuntimeException | Error e) {
      throw e; // Signal.handle's own refusal (IllegalArgumentException) as it was thrown
    } catch (Throwable e) {
      throw new IllegalStateException(e);
    }
  }

  private void handle(Object sig) {
    String name;
    int number;
    try {
      name = (String) nameOf.invokeExact(sig);
      number = (int) numberOf.invokeExact(sig);
    } catch (Throwable e) {
      throw new IllegalStateException(e); // getName and getNumber only read fields
    }
    synchronized (this) {
      if (received == null) {
        received = "SIG" + name;
        first.countDown();
        return;
      }
    }
    Runtime.getRuntime().halt(128 + number);
  }

  /** Waits for the first signal; returns its name ({@code SIGTERM}, {@code SIGINT}). */
  String await() throws InterruptedException {
    first.await();
    return received;
  }
}
