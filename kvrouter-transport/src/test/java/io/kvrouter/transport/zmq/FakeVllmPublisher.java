package io.kvrouter.transport.zmq;

import io.kvrouter.transport.TestWaits;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A vLLM-like KV event publisher for tests: a PUB socket that sends {@code [topic, 8-byte
 * big-endian seq, payload]} and a ROUTER replay socket that answers {@code [empty, start]} with
 * {@code [empty, seq, payload]} for every buffered batch from {@code start} on and then {@code
 * [empty, -1, empty]}, as vLLM's {@code ZmqEventPublisher} does. Both bind to a free loopback port
 * (or the PUB connects, for a router in bind mode).
 *
 * <p>Test levers: drop the next n messages from the live socket (they stay in the replay buffer),
 * send raw frames, restart (new sockets on the same ports, sequence from 0, empty buffer), answer
 * replays with a topic frame, or not at all.
 *
 * <p>Public for kvrouter-server's tests (through this module's test jar).
 *
 * <p>The PUB is an XPUB so the test can wait until a subscriber's subscription has arrived; on the
 * wire it is a PUB. One thread owns the sockets; test threads queue commands.
 */
public final class FakeVllmPublisher implements AutoCloseable {
  private static final byte[] EMPTY = new byte[0];
  private static final byte[] END = ByteBuffer.allocate(8).putLong(-1).array();

  private final String topic;
  private final byte[] topicBytes;
  private final int bufferSteps;
  private final String connectTo;
  private volatile boolean replyWithTopic;
  private volatile boolean answerReplays = true;

  private final LinkedBlockingQueue<Runnable> commands = new LinkedBlockingQueue<>();
  private final AtomicLong nextSeq = new AtomicLong();
  private final AtomicInteger subscriptions = new AtomicInteger();
  private final AtomicInteger replayRequests = new AtomicInteger();
  private final Thread thread;
  private volatile boolean running = true;

  // publisher thread only
  private ZContext ctx;
  private ZMQ.Socket pub;
  private ZMQ.Socket router;
  private ZMQ.Poller poller;
  private final ArrayDeque<Object[]> buffer = new ArrayDeque<>();
  private int dropNext;
  private volatile int pubPort;
  private volatile int replayPort;

  /** A publisher whose PUB and ROUTER bind free loopback ports. */
  public static FakeVllmPublisher bound(String topic) {
    return new FakeVllmPublisher(topic, 10_000, null);
  }

  /** A publisher whose PUB and ROUTER bind free loopback ports, keeping {@code bufferSteps}. */
  static FakeVllmPublisher bound(String topic, int bufferSteps) {
    return new FakeVllmPublisher(topic, bufferSteps, null);
  }

  /**
   * A publisher whose PUB will connect to a router in bind mode ({@link #connectPub}); its ROUTER
   * binds a free loopback port.
   */
  public static FakeVllmPublisher connecting(String topic) {
    return new FakeVllmPublisher(topic, 10_000, "");
  }

  /** Connects the PUB socket of a {@link #connecting} publisher. */
  public void connectPub(String endpoint) {
    run(() -> pub.connect(endpoint));
  }

  private FakeVllmPublisher(String topic, int bufferSteps, String connectTo) {
    this.topic = topic;
    this.topicBytes = topic.getBytes(StandardCharsets.UTF_8);
    this.bufferSteps = bufferSteps;
    this.connectTo = connectTo;
    CompletableFuture<Void> up = new CompletableFuture<>();
    thread =
        new Thread(
            () -> {
              try {
                open(0, 0);
                up.complete(null);
              } catch (RuntimeException e) {
                up.completeExceptionally(e);
                return;
              }
              loop();
            },
            "fake-vllm-" + topic);
    thread.setDaemon(true);
    thread.start();
    up.join();
  }

  private void open(int pubPortWanted, int replayPortWanted) {
    ctx = new ZContext(1);
    ctx.setLinger(0);
    pub = ctx.createSocket(SocketType.XPUB);
    pub.setLinger(0);
    pub.setXpubVerbose(true);
    pub.setSndHWM(100_000);
    if (connectTo == null) {
      pub.bind("tcp://127.0.0.1:" + (pubPortWanted == 0 ? "*" : pubPortWanted));
      pubPort = port(pub.getLastEndpoint());
    } else {
      pub.setReconnectIVL(50);
      pub.setHandshakeIvl(300); // zeromq/jeromq#1022: a fresh outgoing connection may stay mute
    }
    router = ctx.createSocket(SocketType.ROUTER);
    router.setLinger(0);
    router.bind("tcp://127.0.0.1:" + (replayPortWanted == 0 ? "*" : replayPortWanted));
    replayPort = port(router.getLastEndpoint());
    poller = ctx.createPoller(2);
    poller.register(router, ZMQ.Poller.POLLIN);
    poller.register(pub, ZMQ.Poller.POLLIN);
  }

  private static int port(String endpoint) {
    return Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1));
  }

  private void closeSockets() {
    poller.close();
    ctx.close(); // blocks until the sockets and their listeners are gone
  }

  private void loop() {
    try {
      while (running) {
        Runnable c;
        while ((c = commands.poll()) != null) c.run();
        poller.poll(1);
        while (true) {
          byte[] sub = pub.recv(ZMQ.DONTWAIT);
          if (sub == null) break;
          if (sub.length > 0 && sub[0] == 1) subscriptions.incrementAndGet();
        }
        serveReplays();
      }
    } finally {
      closeSockets();
    }
  }

  private void serveReplays() {
    while (true) {
      byte[] id = router.recv(ZMQ.DONTWAIT);
      if (id == null) return;
      List<byte[]> frames = new ArrayList<>();
      while (router.hasReceiveMore()) frames.add(router.recv());
      if (frames.size() != 2 || frames.get(1).length != 8) continue; // vLLM logs and ignores
      replayRequests.incrementAndGet();
      if (!answerReplays) continue;
      long start = ByteBuffer.wrap(frames.get(1)).getLong();
      for (Object[] entry : buffer) {
        long seq = (Long) entry[0];
        if (seq >= start) {
          router.sendMore(id);
          router.sendMore(EMPTY);
          if (replyWithTopic) router.sendMore(topicBytes);
          router.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
          router.send((byte[]) entry[1]);
        }
      }
      router.sendMore(id);
      router.sendMore(EMPTY);
      if (replyWithTopic) router.sendMore(topicBytes);
      router.sendMore(END);
      router.send(EMPTY);
    }
  }

  private void run(Runnable r) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    commands.add(
        () -> {
          try {
            r.run();
            done.complete(null);
          } catch (RuntimeException e) {
            done.completeExceptionally(e);
          }
        });
    done.orTimeout(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS).join();
  }

  /** Publishes one batch payload; returns its sequence number. */
  public long publish(byte[] payload) {
    long seq = nextSeq.getAndIncrement();
    run(send(seq, payload));
    return seq;
  }

  /**
   * Queues one batch payload for the publisher thread without waiting for it to go out (batches
   * leave in call order); returns its sequence number.
   */
  long publishAsync(byte[] payload) {
    long seq = nextSeq.getAndIncrement();
    commands.add(send(seq, payload));
    return seq;
  }

  private Runnable send(long seq, byte[] payload) {
    return () -> {
      if (dropNext > 0) {
        dropNext--;
      } else {
        pub.sendMore(topicBytes);
        pub.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
        pub.send(payload);
      }
      buffer.addLast(new Object[] {seq, payload});
      if (buffer.size() > bufferSteps) buffer.removeFirst();
    };
  }

  /** The next {@code n} batches are buffered for replay but never reach the live socket. */
  public void dropNext(int n) {
    run(() -> dropNext += n);
  }

  /** Sends buffered batch {@code seq} on the live socket once more (a repeat, or a late copy). */
  void resend(long seq) {
    byte[] payload = payload(seq);
    sendRaw(topicBytes, ByteBuffer.allocate(8).putLong(seq).array(), payload);
  }

  /** The payload of buffered batch {@code seq}. */
  byte[] payload(long seq) {
    CompletableFuture<byte[]> found = new CompletableFuture<>();
    run(
        () -> {
          for (Object[] entry : buffer) {
            if ((Long) entry[0] == seq) {
              found.complete((byte[]) entry[1]);
              return;
            }
          }
          found.completeExceptionally(new AssertionError("batch " + seq + " is not buffered"));
        });
    return found.join();
  }

  /** Sends raw frames on the live socket (no sequence number is used up). */
  public void sendRaw(byte[]... frames) {
    run(
        () -> {
          for (int i = 0; i < frames.length - 1; i++) pub.sendMore(frames[i]);
          pub.send(frames[frames.length - 1]);
        });
  }

  /** The engine process restarts: new sockets on the same ports, sequence from 0, empty buffer. */
  public void restart() {
    run(
        () -> {
          closeSockets();
          buffer.clear();
          dropNext = 0;
          nextSeq.set(0);
          open(pubPort, replayPort);
        });
  }

  public void replyWithTopic(boolean on) {
    replyWithTopic = on;
  }

  public void answerReplays(boolean on) {
    answerReplays = on;
  }

  public String topic() {
    return topic;
  }

  /** The sequence number of the last batch published, -1 before the first. */
  public long lastSeq() {
    return nextSeq.get() - 1;
  }

  public String pubEndpoint() {
    return "tcp://127.0.0.1:" + pubPort;
  }

  public String replayEndpoint() {
    return "tcp://127.0.0.1:" + replayPort;
  }

  public int replayRequests() {
    return replayRequests.get();
  }

  /** Waits until {@code n} subscriptions in all have reached the PUB socket. */
  public void awaitSubscriptions(int n, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (subscriptions.get() < n) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "only " + subscriptions.get() + " of " + n + " subscriptions arrived in " + timeout);
      }
      sleep(5);
    }
  }

  public int subscriptions() {
    return subscriptions.get();
  }

  public static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
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

  @Override
  public String toString() {
    return "FakeVllmPublisher[topic=" + topic + ", pub=" + pubEndpoint() + "]";
  }
}
