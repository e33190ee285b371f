package io.kvrouter.transport.zmq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A misbehaving network between one engine's PUB socket and a router: a SUB that takes every
 * message the engine publishes and a PUB (bound to a free loopback port) that passes it on, except
 * that, while faults are on, each message is dropped, sent twice, or held back for a while (so that
 * later ones overtake it) with the given probabilities, drawn from a seeded random source. Replay
 * requests do not pass through the link: the router asks the engine directly, as a real deployment
 * with a lossy pub/sub path but a working request path would.
 *
 * <p>Implementation notes: one thread owns both sockets and the held messages (a queue ordered by
 * release time); test threads only flip {@link #faults} and read the counters. Turning faults off
 * releases every held message at the next turn of the loop; {@link #awaitIdle} waits for that. The
 * PUB side is an XPUB so a test can wait for a router's subscription; the SUB side re-connects by
 * itself when the engine restarts on the same port.
 */
final class FaultyLink implements AutoCloseable {
  private final ZContext ctx = new ZContext(1);
  private final ZMQ.Socket in;
  private final ZMQ.Socket out;
  private final int port;
  private final SplittableRandom random;
  private final double drop;
  private final double duplicate;
  private final double delay;
  private final int maxDelayMs;
  private final Thread thread;
  private volatile boolean running = true;
  private volatile boolean faults = true;

  final AtomicLong forwarded = new AtomicLong();
  final AtomicLong dropped = new AtomicLong();
  final AtomicLong duplicated = new AtomicLong();
  final AtomicLong delayed = new AtomicLong();
  private final AtomicLong subscriptions = new AtomicLong();
  private volatile int held;

  private record Held(long releaseAt, long order, List<byte[]> frames) {}

  FaultyLink(
      String engineEndpoint,
      long seed,
      double drop,
      double duplicate,
      double delay,
      int maxDelayMs) {
    this.random = new SplittableRandom(seed);
    this.drop = drop;
    this.duplicate = duplicate;
    this.delay = delay;
    this.maxDelayMs = maxDelayMs;
    ctx.setLinger(0);
    in = ctx.createSocket(SocketType.SUB);
    in.setLinger(0);
    in.setRcvHWM(0);
    in.setReconnectIVL(20);
    in.setReconnectIVLMax(200);
    in.setHandshakeIvl(300); // zeromq/jeromq#1022: a fresh outgoing connection may stay mute
    in.subscribe(new byte[0]);
    in.connect(engineEndpoint);
    out = ctx.createSocket(SocketType.XPUB);
    out.setLinger(0);
    out.setXpubVerbose(true);
    out.setSndHWM(0);
    out.bind("tcp://127.0.0.1:*");
    String last = out.getLastEndpoint();
    port = Integer.parseInt(last.substring(last.lastIndexOf(':') + 1));
    thread = new Thread(this::loop, "faulty-link-" + port);
    thread.setDaemon(true);
  }

  FaultyLink start() {
    thread.start(); // hands the sockets to the link's thread
    return this;
  }

  /** Where a router subscribes. */
  String endpoint() {
    return "tcp://127.0.0.1:" + port;
  }

  /** Turns the faults on or off; off also releases every held message. */
  void faults(boolean on) {
    faults = on;
  }

  long faultsInjected() {
    return dropped.get() + duplicated.get() + delayed.get();
  }

  /** Subscriptions the router side has made so far. */
  long subscriptionsSeen() {
    return subscriptions.get();
  }

  /** Waits until the router side has subscribed {@code n} times in all. */
  void awaitSubscriptions(long n, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (subscriptions.get() < n) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("only " + subscriptions.get() + " of " + n + " subscriptions");
      }
      FakeVllmPublisher.sleep(5);
    }
  }

  /** Waits until no message is held back. */
  void awaitIdle(Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (held > 0) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(held + " messages still held back");
      }
      FakeVllmPublisher.sleep(5);
    }
  }

  private void loop() {
    PriorityQueue<Held> queue =
        new PriorityQueue<>(Comparator.comparingLong(Held::releaseAt).thenComparing(Held::order));
    long order = 0;
    ZMQ.Poller poller = ctx.createPoller(2);
    poller.register(in, ZMQ.Poller.POLLIN);
    poller.register(out, ZMQ.Poller.POLLIN);
    try {
      while (running) {
        poller.poll(1);
        byte[] sub;
        while ((sub = out.recv(ZMQ.DONTWAIT)) != null) {
          if (sub.length > 0 && sub[0] == 1) subscriptions.incrementAndGet();
        }
        byte[] first;
        while ((first = in.recv(ZMQ.DONTWAIT)) != null) {
          List<byte[]> frames = new ArrayList<>(3);
          frames.add(first);
          while (in.hasReceiveMore()) frames.add(in.recv());
          if (!faults) {
            send(frames);
            continue;
          }
          double r = random.nextDouble();
          if (r < drop) {
            dropped.incrementAndGet();
          } else if (r < drop + duplicate) {
            duplicated.incrementAndGet();
            send(frames);
            send(frames);
          } else if (r < drop + duplicate + delay) {
            delayed.incrementAndGet();
            long at = System.nanoTime() + 1_000_000L * (1 + random.nextInt(maxDelayMs));
            queue.add(new Held(at, order++, frames));
          } else {
            send(frames);
          }
        }
        long now = System.nanoTime();
        while (!queue.isEmpty() && (!faults || queue.peek().releaseAt() <= now)) {
          send(queue.poll().frames());
        }
        held = queue.size();
      }
    } finally {
      poller.close();
      ctx.close();
    }
  }

  private void send(List<byte[]> frames) {
    for (int i = 0; i < frames.size() - 1; i++) out.sendMore(frames.get(i));
    out.send(frames.get(frames.size() - 1));
    forwarded.incrementAndGet();
  }

  @Override
  public void close() {
    running = false;
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
