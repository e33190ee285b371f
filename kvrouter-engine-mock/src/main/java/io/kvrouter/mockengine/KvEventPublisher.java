package io.kvrouter.mockengine;

import io.kvrouter.transport.kvevents.EngineEvent;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/**
 * Publishes KV event batches as vLLM's {@code ZmqEventPublisher} does: a PUB socket sending
 * three-frame messages {@code [topic, 8-byte big-endian sequence, msgpack batch]}, sequence from 0
 * per process, and a ROUTER replay socket that answers {@code [identity, "", 8-byte start]} with
 * {@code [identity, "", seq, payload]} for every buffered batch from {@code start} on, then the end
 * marker {@code [identity, "", -1 as 8 bytes, ""]}. The batch is msgspec's {@code array_like}
 * {@code [ts, [events...], data_parallel_rank]}; events are positional arrays ({@link
 * MockEngineServer.EventEncoding#ARRAY}, trailing defaults omitted as msgspec's {@code
 * omit_defaults} does) or tagged maps ({@link MockEngineServer.EventEncoding#MAP}). Block hashes
 * are msgpack integers (uint64 above 2^63), as vLLM sends them with int block hashes.
 *
 * <pre>
 * Implementation notes
 *
 * publish() runs on the scheduler thread: it assigns the sequence number, encodes, and queues the
 * payload. One platform thread owns the ZContext and both sockets: it binds (after the start-up
 * delay; batches published before that wait in the queue, as a real engine buffers), sends queued
 * payloads, keeps the last buffer_steps of them for replay, and serves replay requests. Ports
 * given as '*' or 0 are chosen before the thread binds, so the endpoints are known at once.
 * </pre>
 */
final class KvEventPublisher implements AutoCloseable {
  private static final byte[] EMPTY = new byte[0];
  private static final byte[] END = ByteBuffer.allocate(8).putLong(-1).array();

  private final KvEventsConfig config;
  private final MockEngineServer.EventEncoding encoding;
  private final Duration startDelay;
  private final byte[] topic;
  private final String pubBind;
  private final String replayBind;
  private final int pubPort;
  private final int replayPort;
  // the endpoints as bound (with ZMQ's port for a wildcard); written before bound completes
  private volatile String pubBound;
  private volatile String replayBound;
  private final LinkedBlockingQueue<Object[]> queue = new LinkedBlockingQueue<>();
  private final AtomicLong nextSeq = new AtomicLong();
  private final CompletableFuture<Void> bound = new CompletableFuture<>();
  private final Thread thread;
  private volatile boolean running = true;
  private final CountDownLatch stopped = new CountDownLatch(1);

  KvEventPublisher(
      KvEventsConfig config, MockEngineServer.EventEncoding encoding, Duration startDelay) {
    this.config = config;
    this.encoding = encoding;
    this.startDelay = startDelay;
    this.topic = config.topic().getBytes(StandardCharsets.UTF_8);
    // a free port is left to ZMQ's own bind (no window in which another process takes it),
    // except with a start delay, whose endpoints must be known before the bind
    boolean upFront = !startDelay.isZero();
    this.pubPort = port(config.endpoint(), upFront);
    this.pubBind = withPort(config.endpoint(), pubPort);
    if (config.replayEndpoint() != null) {
      this.replayPort = port(config.replayEndpoint(), upFront);
      this.replayBind = withPort(config.replayEndpoint(), replayPort);
    } else {
      this.replayPort = -1;
      this.replayBind = null;
    }
    this.thread = Thread.ofPlatform().daemon().name("mock-engine-kv-events").unstarted(this::run);
  }

  /**
   * The port of {@code tcp://host:port}; for {@code *} or 0 a free one chosen now when {@code
   * upFront}, else 0 (ZMQ picks one at bind).
   */
  private static int port(String endpoint, boolean upFront) {
    String p = endpoint.substring(endpoint.lastIndexOf(':') + 1);
    if (p.equals("*") || p.equals("0")) {
      if (!upFront) return 0;
      try (ServerSocket s = new ServerSocket(0)) {
        return s.getLocalPort();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    try {
      return Integer.parseInt(p);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("kv-events-config: no port in " + endpoint);
    }
  }

  private static String withPort(String endpoint, int port) {
    return endpoint.substring(0, endpoint.lastIndexOf(':') + 1) + (port == 0 ? "*" : port);
  }

  private static String connectable(String bind) {
    String hostPort = bind.substring("tcp://".length());
    int colon = hostPort.lastIndexOf(':');
    String host = hostPort.substring(0, colon);
    if (host.equals("*") || host.equals("0.0.0.0")) host = "127.0.0.1";
    return "tcp://" + host + hostPort.substring(colon);
  }

  void start() {
    thread.start();
  }

  void awaitBound(Duration timeout) {
    try {
      bound.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
    } catch (Exception e) {
      throw new IllegalStateException("mock engine: ZMQ sockets not bound after " + timeout, e);
    }
  }

  String pubEndpoint() {
    String b = pubBound;
    return connectable(b != null ? b : pubBind);
  }

  String replayEndpoint() {
    if (replayBind == null) return null;
    String b = replayBound;
    return connectable(b != null ? b : replayBind);
  }

  /** Sequence number of the last batch queued, -1 before the first. */
  long lastQueuedSeq() {
    return nextSeq.get() - 1;
  }

  /** Queues one batch (one engine step's events). */
  void publish(List<EngineEvent> events) {
    byte[] payload = encode(System.currentTimeMillis() / 1000.0, events, encoding);
    long seq = nextSeq.getAndIncrement();
    queue.add(new Object[] {seq, payload});
  }

  private void run() {
    try (ZContext ctx = new ZContext(1)) {
      ctx.setLinger(0);
      ZMQ.Socket pub;
      ZMQ.Socket router = null;
      try {
        if (!startDelay.isZero() && stopped.await(startDelay.toMillis(), TimeUnit.MILLISECONDS)) {
          bound.completeExceptionally(new IllegalStateException("closed before binding"));
          return;
        }
        pub = ctx.createSocket(SocketType.PUB);
        pub.setLinger(0);
        pub.setSndHWM(config.hwm());
        pub.bind(pubBind);
        pubBound = pub.getLastEndpoint();
        if (replayBind != null) {
          router = ctx.createSocket(SocketType.ROUTER);
          router.setLinger(0);
          router.bind(replayBind);
          replayBound = router.getLastEndpoint();
        }
      } catch (InterruptedException e) {
        bound.completeExceptionally(e);
        return;
      } catch (RuntimeException e) {
        bound.completeExceptionally(
            new IllegalStateException(
                "mock engine: cannot bind the KV event sockets "
                    + pubBind
                    + (replayBind == null ? "" : ", " + replayBind)
                    + ": "
                    + zmqReason(e),
                e));
        return;
      }
      bound.complete(null);
      ArrayDeque<Object[]> buffer = new ArrayDeque<>();
      while (running) {
        Object[] item = queue.poll(router == null ? 20 : 1, TimeUnit.MILLISECONDS);
        while (item != null) {
          pub.sendMore(topic);
          pub.sendMore(ByteBuffer.allocate(8).putLong((Long) item[0]).array());
          pub.send((byte[]) item[1]);
          buffer.addLast(item);
          if (buffer.size() > config.bufferSteps()) buffer.removeFirst();
          item = queue.poll();
        }
        // a non-blocking receive each turn (at most 1 ms apart), not a poller: a zero-timeout
        // poll of the ROUTER could miss a request that had already arrived (a replay then got
        // no answer within 10 s on a loaded machine)
        if (router != null) serveReplays(router, buffer);
      }
    } catch (InterruptedException e) {
      // closed
    }
  }

  private static void serveReplays(ZMQ.Socket router, ArrayDeque<Object[]> buffer) {
    while (true) {
      byte[] id = router.recv(ZMQ.DONTWAIT);
      if (id == null) return;
      List<byte[]> frames = new ArrayList<>();
      while (router.hasReceiveMore()) frames.add(router.recv());
      if (frames.size() != 2 || frames.get(1).length != 8) continue; // vLLM logs and ignores it
      long start = ByteBuffer.wrap(frames.get(1)).getLong();
      for (Object[] e : buffer) {
        long seq = (Long) e[0];
        if (seq >= start) {
          router.sendMore(id);
          router.sendMore(EMPTY);
          router.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
          router.send((byte[]) e[1]);
        }
      }
      router.sendMore(id);
      router.sendMore(EMPTY);
      router.sendMore(END);
      router.send(EMPTY);
    }
  }

  /** The msgpack payload of one batch. */
  static byte[] encode(double ts, List<EngineEvent> events, MockEngineServer.EventEncoding enc) {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(3);
      p.packDouble(ts);
      p.packArrayHeader(events.size());
      for (EngineEvent e : events) {
        if (enc == MockEngineServer.EventEncoding.MAP) {
          packMap(p, e);
        } else {
          packArray(p, e);
        }
      }
      p.packInt(0); // data_parallel_rank
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void packArray(MessageBufferPacker p, EngineEvent e) throws IOException {
    switch (e) {
      case EngineEvent.BlockStored s -> {
        // [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium], then for
        // a hybrid model's group [lora_name, extra_keys, group_idx, kind, window?] (vLLM's order,
        // trailing nils left out as msgspec's omit_defaults does)
        boolean group = s.groupIdx() != null;
        boolean window = group && s.kvCacheSpecSlidingWindow() != null;
        p.packArrayHeader(group ? (window ? 12 : 11) : 7);
        p.packString("BlockStored");
        packHashes(p, s.blockHashes());
        if (s.hasParent()) packHash(p, s.parentBlockHash());
        else p.packNil();
        packTokens(p, s.tokenIds());
        p.packInt(s.blockSize());
        p.packNil();
        packNullable(p, s.medium());
        if (group) {
          p.packNil().packNil(); // lora_name, extra_keys
          p.packInt(s.groupIdx());
          packNullable(p, s.kvCacheSpecKind());
          if (window) p.packInt(s.kvCacheSpecSlidingWindow());
        }
      }
      case EngineEvent.BlockRemoved r -> {
        boolean group = r.groupIdx() != null;
        p.packArrayHeader(group ? 4 : 3);
        p.packString("BlockRemoved");
        packHashes(p, r.blockHashes());
        packNullable(p, r.medium());
        if (group) p.packInt(r.groupIdx());
      }
      case EngineEvent.AllBlocksCleared c -> {
        p.packArrayHeader(1);
        p.packString("AllBlocksCleared");
      }
    }
  }

  private static void packMap(MessageBufferPacker p, EngineEvent e) throws IOException {
    switch (e) {
      case EngineEvent.BlockStored s -> {
        int fields = s.groupIdx() == null ? 8 : s.kvCacheSpecSlidingWindow() == null ? 10 : 11;
        p.packMapHeader(fields);
        p.packString("type").packString("BlockStored");
        p.packString("block_hashes");
        packHashes(p, s.blockHashes());
        p.packString("parent_block_hash");
        if (s.hasParent()) packHash(p, s.parentBlockHash());
        else p.packNil();
        p.packString("token_ids");
        packTokens(p, s.tokenIds());
        p.packString("block_size").packInt(s.blockSize());
        p.packString("lora_id").packNil();
        p.packString("medium");
        packNullable(p, s.medium());
        p.packString("lora_name").packNil();
        if (s.groupIdx() != null) {
          p.packString("group_idx").packInt(s.groupIdx());
          p.packString("kv_cache_spec_kind");
          packNullable(p, s.kvCacheSpecKind());
          if (s.kvCacheSpecSlidingWindow() != null) {
            p.packString("kv_cache_spec_sliding_window").packInt(s.kvCacheSpecSlidingWindow());
          }
        }
      }
      case EngineEvent.BlockRemoved r -> {
        p.packMapHeader(r.groupIdx() == null ? 3 : 4);
        p.packString("type").packString("BlockRemoved");
        p.packString("block_hashes");
        packHashes(p, r.blockHashes());
        p.packString("medium");
        packNullable(p, r.medium());
        if (r.groupIdx() != null) p.packString("group_idx").packInt(r.groupIdx());
      }
      case EngineEvent.AllBlocksCleared c -> {
        p.packMapHeader(1);
        p.packString("type").packString("AllBlocksCleared");
      }
    }
  }

  private static void packNullable(MessageBufferPacker p, String s) throws IOException {
    if (s == null) p.packNil();
    else p.packString(s);
  }

  private static void packHashes(MessageBufferPacker p, long[] hashes) throws IOException {
    p.packArrayHeader(hashes.length);
    for (long h : hashes) packHash(p, h);
  }

  private static void packHash(MessageBufferPacker p, long h) throws IOException {
    if (h < 0) p.packBigInteger(new BigInteger(Long.toUnsignedString(h)));
    else p.packLong(h);
  }

  private static void packTokens(MessageBufferPacker p, int[] tokens) throws IOException {
    p.packArrayHeader(tokens.length);
    for (int t : tokens) p.packLong(Integer.toUnsignedLong(t));
  }

  @Override
  public void close() {
    running = false;
    stopped.countDown();
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** ZMQ's errno as words where it has a common one (jeromq says only "Errno 48"). */
  private static String zmqReason(RuntimeException e) {
    if (e instanceof ZMQException z) {
      int code = z.getErrorCode();
      if (code == ZMQ.Error.EADDRINUSE.getCode()) {
        return "address already in use (another process has the port: stop it, or give other"
            + " ports in --kv-events-config)";
      }
      if (code == ZMQ.Error.EADDRNOTAVAIL.getCode()) return "address not available on this host";
    }
    return e.getMessage();
  }
}
