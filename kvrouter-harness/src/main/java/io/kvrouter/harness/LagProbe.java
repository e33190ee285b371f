package io.kvrouter.harness;

import java.io.IOException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * {@code bench fleet}'s event lag: a ZMQ SUB of its own on every engine's PUB socket, beside the
 * router's, takes each batch's {@code ts} (the engine's wall clock at publish, in seconds as the
 * mock engine writes it) from the receive time. The router's own subscriber sees the same messages
 * on the same path; applying a batch adds microseconds.
 *
 * <pre>
 * Implementation notes
 *
 * One ZContext; one SUB socket per engine (subscribed to everything, no high-water mark, 100 ms
 * receive timeout) owned by one platform daemon thread, which alone receives on it and closes it.
 * A message of at least 3 frames is a batch: its last frame is msgpack [ts, ...]; each lag in
 * milliseconds is added to lagsMs, a synchronized list, the only state the threads share with the
 * caller (sortedLags() copies it under its lock). A payload the probe does not understand is not
 * counted. close() sets the volatile stop, joins every thread (up to 2 s each; a receive returns
 * within 100 ms) and closes the context.
 * </pre>
 */
final class LagProbe implements AutoCloseable {
  private final ZContext ctx = new ZContext(1);
  private final List<Thread> threads = new ArrayList<>();
  private final List<Double> lagsMs = Collections.synchronizedList(new ArrayList<>());
  private volatile boolean stop;

  LagProbe(List<? extends FleetEngine> fleet) {
    for (FleetEngine e : fleet) {
      ZMQ.Socket sub = ctx.createSocket(SocketType.SUB);
      sub.setReceiveTimeOut(100);
      sub.setRcvHWM(0);
      sub.subscribe(new byte[0]);
      sub.connect(e.events());
      threads.add(Thread.ofPlatform().daemon().name("bench-fleet-lag").start(() -> loop(sub)));
    }
  }

  private void loop(ZMQ.Socket sub) {
    while (!stop) {
      ZMsg m;
      try {
        m = ZMsg.recvMsg(sub);
      } catch (RuntimeException closed) {
        return;
      }
      if (m == null || m.size() < 3) continue;
      double lag = lagMs(m.getLast().getData(), Instant.now().toEpochMilli());
      if (!Double.isNaN(lag)) lagsMs.add(lag);
    }
    sub.close();
  }

  /**
   * The lag in milliseconds of a batch whose msgpack payload starts with its publish time {@code
   * ts} in seconds, received at {@code nowMs}; NaN for a payload that does not.
   */
  static double lagMs(byte[] payload, double nowMs) {
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
      u.unpackArrayHeader();
      double ts = u.unpackDouble();
      return nowMs - ts * 1000.0;
    } catch (IOException | RuntimeException notABatch) {
      return Double.NaN;
    }
  }

  /** The lags seen so far, sorted. */
  double[] sortedLags() {
    synchronized (lagsMs) {
      return Percentiles.sorted(lagsMs);
    }
  }

  @Override
  public void close() {
    stop = true;
    for (Thread t : threads) {
      try {
        t.join(2000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    ctx.close();
  }
}
