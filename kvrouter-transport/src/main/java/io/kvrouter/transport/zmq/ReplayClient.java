package io.kvrouter.transport.zmq;

import static java.util.Objects.requireNonNull;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The router's side of an engine's replay socket: a DEALER that asks for every batch from a start
 * sequence number and reads the answers one by one.
 *
 * <pre>
 * Implementation notes
 *
 * Thread ownership: the first DEALER is made by start() on the caller's thread (so that a bad
 * endpoint fails there) and handed to the subscriber's thread with it; from then on only that
 * thread uses, closes and remakes it (ZMQ sockets are not thread-safe). A DEALER is thrown away
 * (linger 0) after a replay that is abandoned half-way, so that late answers to an old request
 * can never be taken for answers to the next one; the engine's ROUTER drops replies to a peer
 * that is gone.
 *
 * Wire: request [empty, 8-byte big-endian start]; vLLM's ROUTER answers
 * [empty, seq, payload] per buffered batch with seq >= start, then [empty, -1, empty]. The
 * leading empty delimiter is optional here, and a topic frame before seq is accepted too:
 * after dropping an empty first frame, 2 frames are [seq, payload], 3 are [topic, seq, payload].
 * The receive high-water mark is unlimited: a replay can hold the engine's whole buffer (10,000
 * batches by default) and the ROUTER silently drops what does not fit.
 * </pre>
 */
final class ReplayClient implements Replay {
  private static final int POLL_SLICE_MS = 50;

  private final ZContext ctx;
  private final String endpoint;
  private final int reconnectIvlMs;
  private final int reconnectIvlMaxMs;
  private final int handshakeMs;
  // null: no socket (before open(), after reset())
  private ZMQ.@Nullable Socket dealer;
  private ZMQ.@Nullable Poller poller;

  ReplayClient(
      ZContext ctx, String endpoint, int reconnectIvlMs, int reconnectIvlMaxMs, int handshakeMs) {
    this.ctx = ctx;
    this.endpoint = endpoint;
    this.reconnectIvlMs = reconnectIvlMs;
    this.reconnectIvlMaxMs = reconnectIvlMaxMs;
    this.handshakeMs = handshakeMs;
  }

  @Override
  public String endpoint() {
    return endpoint;
  }

  /**
   * Makes the DEALER if there is none and returns it; throws for an endpoint ZMQ cannot parse or
   * resolve.
   */
  ZMQ.Socket open() {
    ZMQ.Socket d = dealer;
    if (d == null) {
      d = ctx.createSocket(SocketType.DEALER);
      dealer = d;
      try {
        d.setLinger(0);
        d.setRcvHWM(0);
        d.setReconnectIVL(reconnectIvlMs);
        d.setReconnectIVLMax(reconnectIvlMaxMs);
        d.setHandshakeIvl(handshakeMs);
        d.connect(endpoint);
        ZMQ.Poller p = ctx.createPoller(1);
        poller = p;
        p.register(d, ZMQ.Poller.POLLIN);
      } catch (RuntimeException e) {
        reset();
        throw e;
      }
    }
    return d;
  }

  @Override
  public boolean request(long start) {
    ZMQ.Socket d = open();
    byte[] seq = ByteBuffer.allocate(8).putLong(start).array();
    return d.send(new byte[0], ZMQ.SNDMORE | ZMQ.DONTWAIT) && d.send(seq, ZMQ.DONTWAIT);
  }

  @Override
  public @Nullable Reply next(long timeoutMs, BooleanSupplier running) {
    final long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (running.getAsBoolean()) {
      // request() opened both, and only reset() drops them: next() reads a request's answers
      ZMQ.Socket d = requireNonNull(dealer, "next() without a request()");
      byte[] first = d.recv(ZMQ.DONTWAIT);
      if (first != null) {
        return parse(readRest(d, first));
      }
      long left = (deadline - System.nanoTime()) / 1_000_000L;
      if (left <= 0) {
        return null;
      }
      requireNonNull(poller, "next() without a request()").poll(Math.min(left, POLL_SLICE_MS));
    }
    return null;
  }

  private static List<byte[]> readRest(ZMQ.Socket dealer, byte[] first) {
    List<byte[]> frames = new ArrayList<>(4);
    frames.add(first);
    while (dealer.hasReceiveMore()) {
      byte[] f = dealer.recv();
      if (frames.size() < 8) frames.add(f);
    }
    return frames;
  }

  static Reply parse(List<byte[]> frames) {
    int from = frames.size() >= 3 && frames.get(0).length == 0 ? 1 : 0;
    int n = frames.size() - from;
    if (n != 2 && n != 3) {
      return new Reply(
          0,
          null,
          "expected [seq, payload] or [topic, seq, payload] after the delimiter, got "
              + frames.size()
              + " frames");
    }
    byte[] seq = frames.get(frames.size() - 2);
    if (seq.length != 8) {
      return new Reply(0, null, "the sequence frame has " + seq.length + " bytes, expected 8");
    }
    long s = ByteBuffer.wrap(seq).getLong();
    if (s == -1) {
      return Reply.END;
    }
    if (s < 0) {
      return new Reply(0, null, "negative sequence number " + s);
    }
    return new Reply(s, frames.get(frames.size() - 1), null);
  }

  /** Drops the socket (and with it every answer still on its way). */
  @Override
  public void reset() {
    ZMQ.Poller p = poller;
    if (p != null) {
      p.close();
      poller = null;
    }
    ZMQ.Socket d = dealer;
    if (d != null) {
      d.close(); // linger 0, as set in open(); the context forgets the socket
      dealer = null;
    }
  }
}
