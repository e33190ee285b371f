package io.kvrouter.transport.nats;

import io.kvrouter.event.Worker;
import io.kvrouter.route.SequenceChange;
import io.kvrouter.route.SequenceChange.Corrected;
import io.kvrouter.route.SequenceChange.Predicted;
import io.kvrouter.route.SequenceChange.PrefillCompleted;
import io.kvrouter.route.SequenceChange.Released;
import io.kvrouter.route.SequenceChange.Routed;
import io.kvrouter.route.SequenceSync.Capacity;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The wire format of sequence sync (docs/service.md, "Several replicas share their in-flight
 * load"): one binary message carries a batch of one replica's bookkeeping changes, its goodbye, or
 * one chunk of its snapshot.
 *
 * <pre>
 * Implementation notes
 *
 * Binary, not JSON: a routed request carries its sequence hashes (one 64-bit number per block,
 * hundreds for a long prompt), 8 bytes each here against about 20 as JSON digits, and decoding is
 * a loop of getLong. Big-endian, no dependency.
 *
 *   message = magic 0x4B 0x53 ("KS"), version u8 (1), kind u8 (1 batch, 2 bye, 3 snapshot chunk),
 *             replica id (varint length, UTF-8), incarnation i64, sequence i64 (batch: the number
 *             of its first change, or for an empty batch, a heartbeat, the next one; snapshot:
 *             upToSequence), sent-at wall-clock milliseconds i64,
 *             [snapshot only: chunk index varint, chunk count varint],
 *             record count varint, records
 *   record  = type u8, body length varint, body
 *     1 routed             request id (varint length, UTF-8), worker id i64, dp rank varint,
 *                          prefill tokens varint, hash count varint, hashes i64 each
 *     2 prefill completed  request id
 *     3 freed              request id
 *     4 expired            request id
 *     5 predicted          prediction number varint, worker id i64, dp rank varint, age in ms
 *                          varint, hash count varint, local hashes i64 each (root first)
 *     6 corrected          prediction number varint, worker id i64, dp rank varint, predicted
 *                          blocks varint, hash count varint (the cached blocks), local hashes
 *     7 predictions up to  (snapshot chunks) the last prediction number the snapshot's model
 *                          includes, varint
 *     8 capacity           (snapshot chunk 0) worker id i64, dp rank varint, the model's capacity
 *                          of that rank in blocks varint (0: unknown)
 *     other                skipped by its length, not numbered
 *   Sequence numbers count records of types 1-4 only: types 5 and 6 (approximate mode's cache
 *   model, SequenceChange.Prediction) carry their own numbers, so a receiver that skips them (an
 *   event-mode replica, or a build from before they existed, which skipped every type from 5 on)
 *   numbers the rest the same.
 *
 * A decoder never trusts a length: every count and length is checked against the bytes left, so a
 * corrupt message is a FormatException, never a huge allocation.
 * </pre>
 */
final class SyncCodec {
  static final byte MAGIC0 = 0x4B;
  static final byte MAGIC1 = 0x53;
  static final byte VERSION = 1;

  /**
   * The most chunks a snapshot may announce: a receiver sizes an array by the count, so a hostile
   * or corrupt count must not allocate gigabytes (65,536 chunks of NATS's 1 MiB payload is 64 GiB,
   * far past any model a router holds).
   */
  static final int MAX_CHUNKS = 1 << 16;

  static final byte KIND_BATCH = 1;
  static final byte KIND_BYE = 2;
  static final byte KIND_SNAPSHOT = 3;
  static final byte ROUTED = 1;
  static final byte PREFILL_COMPLETED = 2;
  static final byte FREED = 3;
  static final byte EXPIRED = 4;

  static final byte PREDICTED = 5;
  static final byte CORRECTED = 6;
  static final byte PREDICTIONS_UP_TO = 7;
  static final byte CAPACITY = 8;

  private SyncCodec() {}

  /** A message that is not one of ours, or is cut short. */
  static final class FormatException extends Exception {
    FormatException(String message) {
      super(message);
    }
  }

  /**
   * A decoded message.
   *
   * @param sequence a batch's first change number (or a heartbeat's next), a snapshot's upTo
   * @param chunk a snapshot chunk's index (0 otherwise)
   * @param chunks a snapshot's chunk count (0 otherwise)
   * @param upToPrediction a snapshot's last prediction number (0 otherwise)
   * @param capacities a snapshot's model capacities (chunk 0; empty otherwise)
   */
  record Message(
      byte kind,
      String replicaId,
      long incarnation,
      long sequence,
      long sentAtMillis,
      int chunk,
      int chunks,
      long upToPrediction,
      List<Capacity> capacities,
      List<SequenceChange> changes) {}

  /** Bytes of {@code capacities} as records. */
  static int capacitiesSize(List<Capacity> capacities) {
    int n = 0;
    for (Capacity c : capacities) {
      int body = capacityBody(c);
      n += 1 + varintSize(body) + body;
    }
    return n;
  }

  private static int capacityBody(Capacity c) {
    return 8 + varintSize(c.worker().dpRank()) + varintSize(wireBlocks(c));
  }

  private static long wireBlocks(Capacity c) {
    return c.blocks() == Long.MAX_VALUE ? 0 : c.blocks();
  }

  /** Bytes of {@code c} as a record (type, length, body). */
  static int recordSize(SequenceChange c) {
    int body = bodySize(c);
    return 1 + varintSize(body) + body;
  }

  private static int bodySize(SequenceChange c) {
    return switch (c) {
      case Routed r ->
          stringSize(r.requestId())
              + 8
              + varintSize(r.worker().dpRank())
              + varintSize(r.prefillTokens())
              + hashesSize(r.seqHashes());
      case PrefillCompleted pc -> stringSize(pc.requestId());
      case Released rl -> stringSize(rl.requestId());
      case Predicted p ->
          varintSize(p.number())
              + 8
              + varintSize(p.worker().dpRank())
              + varintSize(p.ageMillis())
              + hashesSize(p.localHashes());
      case Corrected x ->
          varintSize(x.number())
              + 8
              + varintSize(x.worker().dpRank())
              + varintSize(x.predictedBlocks())
              + hashesSize(x.localHashes());
    };
  }

  private static int stringSize(String s) {
    int n = utf8Length(s);
    return varintSize(n) + n;
  }

  private static int hashesSize(long[] h) {
    return varintSize(h.length) + 8 * h.length;
  }

  /** Bytes of the header of a message from {@code replicaId} (snapshot chunks: a bit more). */
  static int headerSize(String replicaId) {
    int id = utf8Length(replicaId);
    return 4 + varintSize(id) + id + 24 + 10 + 5;
  }

  /** Encodes a batch (or, with no changes, a heartbeat) of {@code changes}. */
  static byte[] batch(
      String replicaId, long incarnation, long first, long sentAt, List<SequenceChange> changes) {
    return encode(KIND_BATCH, replicaId, incarnation, first, 0, List.of(), sentAt, 0, 0, changes);
  }

  /** Encodes a goodbye: the replica is stopping, drop its requests. */
  static byte[] bye(String replicaId, long incarnation, long next, long sentAt) {
    return encode(KIND_BYE, replicaId, incarnation, next, 0, List.of(), sentAt, 0, 0, List.of());
  }

  /**
   * Encodes chunk {@code chunk} of {@code chunks} of a snapshot up to change {@code upTo} and
   * prediction {@code upToPrediction}: its requests (Routed), its model's chains (Predicted) and
   * (the caller puts them in chunk 0) the model's capacities.
   */
  static byte[] snapshotChunk(
      String replicaId,
      long incarnation,
      long upTo,
      long upToPrediction,
      List<Capacity> capacities,
      long sentAt,
      int chunk,
      int chunks,
      List<? extends SequenceChange> entries) {
    return encode(
        KIND_SNAPSHOT,
        replicaId,
        incarnation,
        upTo,
        upToPrediction,
        capacities,
        sentAt,
        chunk,
        chunks,
        entries);
  }

  private static byte[] encode(
      byte kind,
      String replicaId,
      long incarnation,
      long sequence,
      long upToPrediction,
      List<Capacity> capacities,
      long sentAt,
      int chunk,
      int chunks,
      List<? extends SequenceChange> changes) {
    int size = headerSize(replicaId) + 2 * 5 + 12 + capacitiesSize(capacities);
    for (SequenceChange c : changes) size += recordSize(c);
    ByteBuffer b = ByteBuffer.allocate(size);
    b.put(MAGIC0).put(MAGIC1).put(VERSION).put(kind);
    putString(b, replicaId);
    b.putLong(incarnation).putLong(sequence).putLong(sentAt);
    if (kind == KIND_SNAPSHOT) {
      putVarint(b, chunk);
      putVarint(b, chunks);
    }
    final boolean mark = kind == KIND_SNAPSHOT;
    putVarint(b, changes.size() + (mark ? 1 : 0) + capacities.size());
    if (mark) {
      b.put(PREDICTIONS_UP_TO);
      putVarint(b, varintSize(upToPrediction));
      putVarint(b, upToPrediction);
    }
    for (Capacity c : capacities) {
      b.put(CAPACITY);
      putVarint(b, capacityBody(c));
      b.putLong(c.worker().workerId());
      putVarint(b, c.worker().dpRank());
      putVarint(b, wireBlocks(c));
    }
    for (SequenceChange c : changes) {
      final int body = bodySize(c);
      switch (c) {
        case Routed r -> {
          b.put(ROUTED);
          putVarint(b, body);
          putString(b, r.requestId());
          b.putLong(r.worker().workerId());
          putVarint(b, r.worker().dpRank());
          putVarint(b, r.prefillTokens());
          putHashes(b, r.seqHashes());
        }
        case PrefillCompleted pc -> {
          b.put(PREFILL_COMPLETED);
          putVarint(b, body);
          putString(b, pc.requestId());
        }
        case Released rl -> {
          b.put(rl.expired() ? EXPIRED : FREED);
          putVarint(b, body);
          putString(b, rl.requestId());
        }
        case Predicted p -> {
          b.put(PREDICTED);
          putVarint(b, body);
          putVarint(b, p.number());
          b.putLong(p.worker().workerId());
          putVarint(b, p.worker().dpRank());
          putVarint(b, p.ageMillis());
          putHashes(b, p.localHashes());
        }
        case Corrected x -> {
          b.put(CORRECTED);
          putVarint(b, body);
          putVarint(b, x.number());
          b.putLong(x.worker().workerId());
          putVarint(b, x.worker().dpRank());
          putVarint(b, x.predictedBlocks());
          putHashes(b, x.localHashes());
        }
      }
    }
    byte[] out = new byte[b.position()];
    b.flip().get(out);
    return out;
  }

  /** Decodes a message; records of unknown types are skipped. */
  static Message decode(byte[] data) throws FormatException {
    ByteBuffer b = ByteBuffer.wrap(data);
    try {
      if (b.remaining() < 4 || b.get() != MAGIC0 || b.get() != MAGIC1) {
        throw new FormatException("not a sequence sync message");
      }
      byte version = b.get();
      if (version != VERSION) throw new FormatException("unknown version " + version);
      byte kind = b.get();
      if (kind != KIND_BATCH && kind != KIND_BYE && kind != KIND_SNAPSHOT) {
        throw new FormatException("unknown kind " + kind);
      }
      String replica = getString(b);
      long incarnation = b.getLong();
      long sequence = b.getLong();
      long sentAt = b.getLong();
      int chunk = 0;
      int chunks = 0;
      if (kind == KIND_SNAPSHOT) {
        chunk = (int) getVarint(b, MAX_CHUNKS - 1);
        chunks = (int) getVarint(b, MAX_CHUNKS); // a peer's count sizes the receiver's array
        if (chunk >= chunks) throw new FormatException("chunk " + chunk + " of " + chunks);
      }
      int count = (int) getVarint(b, Integer.MAX_VALUE);
      if (count > b.remaining() / 2) throw new FormatException(count + " records cut short");
      List<SequenceChange> changes = new ArrayList<>(count);
      long upToPrediction = 0;
      List<Capacity> capacities = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        if (b.remaining() < 2) throw new FormatException("record " + i + " cut short");
        byte type = b.get();
        int len = (int) getVarint(b, Integer.MAX_VALUE);
        if (len > b.remaining()) throw new FormatException("record " + i + " cut short");
        int end = b.position() + len;
        switch (type) {
          case ROUTED -> {
            String id = getString(b);
            long worker = b.getLong();
            int rank = (int) getVarint(b, Integer.MAX_VALUE);
            // a prompt's tokens: an int locally, so a larger count is corrupt, not a load
            long prefill = getVarint(b, Integer.MAX_VALUE);
            changes.add(new Routed(id, new Worker(worker, rank), getHashes(b, end), prefill));
          }
          case PREDICTED -> {
            long number = getVarint(b, Long.MAX_VALUE);
            long worker = b.getLong();
            int rank = (int) getVarint(b, Integer.MAX_VALUE);
            long age = getVarint(b, Long.MAX_VALUE);
            changes.add(new Predicted(number, new Worker(worker, rank), getHashes(b, end), age));
          }
          case CORRECTED -> {
            long number = getVarint(b, Long.MAX_VALUE);
            long worker = b.getLong();
            int rank = (int) getVarint(b, Integer.MAX_VALUE);
            int predicted = (int) getVarint(b, Integer.MAX_VALUE);
            long[] h = getHashes(b, end);
            changes.add(new Corrected(number, new Worker(worker, rank), h, predicted, h.length));
          }
          case PREDICTIONS_UP_TO -> upToPrediction = getVarint(b, Long.MAX_VALUE);
          case CAPACITY -> {
            long worker = b.getLong();
            int rank = (int) getVarint(b, Integer.MAX_VALUE);
            long blocks = getVarint(b, Long.MAX_VALUE);
            capacities.add(
                new Capacity(new Worker(worker, rank), blocks == 0 ? Long.MAX_VALUE : blocks));
          }
          case PREFILL_COMPLETED -> changes.add(new PrefillCompleted(getString(b)));
          case FREED -> changes.add(new Released(getString(b), false));
          case EXPIRED -> changes.add(new Released(getString(b), true));
          default -> {} // reserved or newer: skipped, not numbered
        }
        if (b.position() > end) throw new FormatException("record " + i + " overruns its length");
        b.position(end);
      }
      return new Message(
          kind,
          replica,
          incarnation,
          sequence,
          sentAt,
          chunk,
          chunks,
          upToPrediction,
          capacities,
          changes);
    } catch (BufferUnderflowException | IllegalArgumentException e) {
      throw new FormatException("cut short or corrupt: " + e);
    }
  }

  // ------------------------------------------------------------------ primitives

  private static void putString(ByteBuffer b, String s) {
    byte[] u = s.getBytes(StandardCharsets.UTF_8);
    putVarint(b, u.length);
    b.put(u);
  }

  private static void putHashes(ByteBuffer b, long[] h) {
    putVarint(b, h.length);
    for (long x : h) b.putLong(x);
  }

  /** A count and that many hashes, all before {@code end}. */
  private static long[] getHashes(ByteBuffer b, int end) throws FormatException {
    int n = (int) getVarint(b, Math.max(0, end - b.position()) / 8);
    long[] h = new long[n];
    for (int k = 0; k < n; k++) h[k] = b.getLong();
    return h;
  }

  private static String getString(ByteBuffer b) throws FormatException {
    int n = (int) getVarint(b, Integer.MAX_VALUE);
    if (n > b.remaining()) throw new FormatException("string of " + n + " bytes cut short");
    String s = new String(b.array(), b.arrayOffset() + b.position(), n, StandardCharsets.UTF_8);
    b.position(b.position() + n);
    return s;
  }

  private static void putVarint(ByteBuffer b, long v) {
    while ((v & ~0x7FL) != 0) {
      b.put((byte) ((v & 0x7F) | 0x80));
      v >>>= 7;
    }
    b.put((byte) v);
  }

  /** An unsigned varint of at most {@code max}. */
  private static long getVarint(ByteBuffer b, long max) throws FormatException {
    long v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      byte x = b.get();
      v |= (long) (x & 0x7F) << shift;
      if (x >= 0) {
        if (v < 0 || v > max) throw new FormatException("length or count " + v + " too large");
        return v;
      }
    }
    throw new FormatException("varint longer than 64 bits");
  }

  private static int varintSize(long v) {
    int n = 1;
    while ((v & ~0x7FL) != 0) {
      n++;
      v >>>= 7;
    }
    return n;
  }

  private static int utf8Length(String s) {
    // exact for well-formed strings; an upper bound with lone surrogates (encoded as '?')
    int n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      n += c < 0x80 ? 1 : c < 0x800 ? 2 : Character.isSurrogate(c) ? 2 : 3;
    }
    return n;
  }
}
