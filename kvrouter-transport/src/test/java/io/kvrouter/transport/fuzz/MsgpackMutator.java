package io.kvrouter.transport.fuzz;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/**
 * Seeded mutations of msgpack payloads (test support for the decoder fuzz tests): byte flips,
 * interesting bytes, truncation, insertion, deletion, duplication, splicing of two seeds, forged
 * huge length headers, deep nesting, and type confusion (one value of the decoded tree replaced by
 * a value of another type, then re-encoded).
 */
public final class MsgpackMutator {
  /*
   * Implementation notes
   *
   * Every mutation is a pure function of (seed payloads, Random), so a failing input is
   * reproduced by its test's seed and input number. Structural mutations (type confusion) decode
   * the seed with msgpack-core's Value API; seeds that do not decode (the malformed vectors) fall
   * back to a byte-level mutation. Nothing here knows the KVEventBatch grammar: the decoder must
   * cope with whatever comes out.
   */

  /** Bytes that start interesting msgpack values: fixarray/fixmap/fixstr ends, nil, 0xc1, ... */
  private static final int[] INTERESTING = {
    0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
    0xca, 0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff
  };

  /** Headers that declare far more than any payload holds. */
  private static final byte[][] HUGE =
      hex(
          "ddffffffff", // array32 of 2^32-1
          "dd7fffffff", // array32 of 2^31-1
          "dcffff", // array16 of 65535
          "dfffffffff", // map32
          "de ffff",
          "dbffffffff", // str32
          "da ffff",
          "d9ff",
          "c6ffffffff", // bin32
          "c5ffff",
          "c9ffffffff01", // ext32
          "cfffffffffffffffff", // u64 max
          "d38000000000000000", // i64 min
          "cb7ff8000000000000", // NaN
          "cbfff0000000000000"); // -Infinity

  private final List<byte[]> seeds;
  private final Random rnd;

  public MsgpackMutator(List<byte[]> seeds, Random rnd) {
    if (seeds.isEmpty()) throw new IllegalArgumentException("no seeds");
    this.seeds = List.copyOf(seeds);
    this.rnd = rnd;
  }

  /** A seed, unchanged. */
  public byte[] seed() {
    return seeds.get(rnd.nextInt(seeds.size())).clone();
  }

  /** One to three mutations of a random seed. */
  public byte[] next() {
    byte[] b = seed();
    int n = 1 + rnd.nextInt(3);
    for (int i = 0; i < n; i++) b = mutate(b);
    return b;
  }

  /** The name of each mutation kind, by its number in {@link #mutate(byte[], int)}. */
  private static final String[] KINDS = {
    "bit flip",
    "interesting byte",
    "truncate",
    "insert random bytes",
    "delete range",
    "duplicate range",
    "splice",
    "huge length",
    "deep nesting",
    "type confusion",
    "random bytes"
  };

  public byte[] mutate(byte[] b) {
    return mutate(b, rnd.nextInt(KINDS.length));
  }

  public byte[] mutate(byte[] b, int kind) {
    int n = b.length;
    switch (kind) {
      case 0 -> {
        if (n == 0) return b;
        b = b.clone();
        int flips = 1 + rnd.nextInt(4);
        for (int i = 0; i < flips; i++) b[rnd.nextInt(n)] ^= (byte) (1 << rnd.nextInt(8));
        return b;
      }
      case 1 -> {
        if (n == 0) return b;
        b = b.clone();
        b[rnd.nextInt(n)] = (byte) INTERESTING[rnd.nextInt(INTERESTING.length)];
        return b;
      }
      case 2 -> {
        return Arrays.copyOf(b, n == 0 ? 0 : rnd.nextInt(n));
      }
      case 3 -> {
        byte[] ins = new byte[1 + rnd.nextInt(8)];
        rnd.nextBytes(ins);
        return insert(b, rnd.nextInt(n + 1), ins);
      }
      case 4 -> {
        if (n == 0) return b;
        int from = rnd.nextInt(n);
        int to = from + 1 + rnd.nextInt(Math.min(16, n - from));
        byte[] out = new byte[n - (to - from)];
        System.arraycopy(b, 0, out, 0, from);
        System.arraycopy(b, to, out, from, n - to);
        return out;
      }
      case 5 -> {
        if (n == 0) return b;
        int from = rnd.nextInt(n);
        int len = 1 + rnd.nextInt(Math.min(32, n - from));
        return insert(b, rnd.nextInt(n + 1), Arrays.copyOfRange(b, from, from + len));
      }
      case 6 -> {
        byte[] other = seed();
        int cut = rnd.nextInt(n + 1);
        int from = rnd.nextInt(other.length + 1);
        byte[] out = Arrays.copyOf(b, cut + other.length - from);
        System.arraycopy(other, from, out, cut, other.length - from);
        return out;
      }
      case 7 -> {
        byte[] h = HUGE[rnd.nextInt(HUGE.length)];
        int at = rnd.nextInt(n + 1);
        if (rnd.nextBoolean() && n > 0) {
          // overwrite rather than insert: a value's own header now lies about its length
          byte[] out = b.clone();
          at = rnd.nextInt(n);
          System.arraycopy(h, 0, out, at, Math.min(h.length, n - at));
          return out;
        }
        return insert(b, at, h);
      }
      case 8 -> {
        // up to 100,000 levels of one-element arrays (0x91) or maps with a nil key (0x81 0xc0)
        int depth = rnd.nextInt(4) == 0 ? 1 + rnd.nextInt(100_000) : 1 + rnd.nextInt(64);
        boolean maps = rnd.nextBoolean();
        byte[] nest = new byte[depth * (maps ? 2 : 1)];
        for (int i = 0; i < depth; i++) {
          if (maps) {
            nest[2 * i] = (byte) 0x81;
            nest[2 * i + 1] = (byte) 0xc0;
          } else {
            nest[i] = (byte) 0x91;
          }
        }
        return insert(b, rnd.nextInt(n + 1), nest);
      }
      case 9 -> {
        return confuseTypes(b);
      }
      default -> {
        byte[] out = new byte[rnd.nextInt(64)];
        rnd.nextBytes(out);
        return out;
      }
    }
  }

  /** Replaces one value of the decoded tree by a value of another type; bytes if undecodable. */
  private byte[] confuseTypes(byte[] b) {
    try {
      return confuseTypesOrFail(b);
    } catch (StackOverflowError e) {
      return mutate(b, 1); // a deeply nested input: msgpack-core's Value reader recurses
    }
  }

  private byte[] confuseTypesOrFail(byte[] b) {
    // the input must be one whole value whose every container header is backed by bytes, or
    // unpackValue() would allocate what a forged header declares
    if (!wellFormed(b)) return mutate(b, 1);
    Value v;
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(b)) {
      if (!u.hasNext()) return mutate(b, 1);
      v = u.unpackValue();
      if (u.hasNext()) return mutate(b, 1);
    } catch (IOException | RuntimeException e) {
      return mutate(b, 1);
    }
    int[] count = {0};
    count(v, count);
    int target = rnd.nextInt(count[0]);
    Value replaced = replace(v, new int[] {target});
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packValue(replaced);
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** One complete msgpack value, no container declaring more elements than bytes left. */
  private static boolean wellFormed(byte[] b) {
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(b)) {
      long count = 1;
      while (count > 0) {
        if (!u.hasNext()) return false;
        MessageFormat f = u.getNextFormat();
        long left = b.length - u.getTotalReadBytes();
        switch (f.getValueType()) {
          case ARRAY -> {
            int n = u.unpackArrayHeader();
            if (n < 0 || n > left) return false;
            count += n;
          }
          case MAP -> {
            int n = u.unpackMapHeader();
            if (n < 0 || 2L * n > left) return false;
            count += 2L * n;
          }
          default -> u.skipValue();
        }
        count--;
      }
      return !u.hasNext();
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private static void count(Value v, int[] n) {
    n[0]++;
    if (v.isArrayValue()) {
      for (Value e : v.asArrayValue()) count(e, n);
    } else if (v.isMapValue()) {
      for (var e : v.asMapValue().entrySet()) {
        count(e.getKey(), n);
        count(e.getValue(), n);
      }
    }
  }

  /** The tree with node number {@code left[0]} (pre-order) replaced. */
  private Value replace(Value v, int[] left) {
    if (left[0]-- == 0) return randomValue(v);
    if (v.isArrayValue()) {
      List<Value> out = new ArrayList<>();
      for (Value e : v.asArrayValue()) out.add(left[0] >= 0 ? replace(e, left) : e);
      return ValueFactory.newArray(out);
    }
    if (v.isMapValue()) {
      List<Value> kv = new ArrayList<>();
      for (var e : v.asMapValue().entrySet()) {
        kv.add(left[0] >= 0 ? replace(e.getKey(), left) : e.getKey());
        kv.add(left[0] >= 0 ? replace(e.getValue(), left) : e.getValue());
      }
      return ValueFactory.newMap(kv.toArray(new Value[0]));
    }
    return v;
  }

  /** A value of a type other than {@code old}'s (or a boundary value of the same type). */
  private Value randomValue(Value old) {
    return switch (rnd.nextInt(14)) {
      case 0 -> ValueFactory.newNil();
      case 1 -> ValueFactory.newBoolean(rnd.nextBoolean());
      case 2 -> ValueFactory.newInteger(-1);
      case 3 -> ValueFactory.newInteger(Long.MIN_VALUE);
      case 4 -> ValueFactory.newInteger(new BigInteger("18446744073709551615"));
      case 5 -> ValueFactory.newInteger(0xFFFF_FFFFL + rnd.nextInt(3));
      case 6 -> ValueFactory.newFloat(rnd.nextBoolean() ? Double.NaN : 1e300);
      case 7 -> ValueFactory.newString(rnd.nextBoolean() ? "" : "BlockStored");
      case 8 -> ValueFactory.newBinary(new byte[rnd.nextInt(40)]);
      case 9 -> ValueFactory.newArray(List.of());
      case 10 -> ValueFactory.newArray(List.of(old, old));
      case 11 -> ValueFactory.newMap(new Value[0]);
      case 12 -> ValueFactory.newMap(new Value[] {ValueFactory.newString("type"), old});
      default -> ValueFactory.newExtension((byte) rnd.nextInt(128), new byte[rnd.nextInt(9)]);
    };
  }

  private static byte[] insert(byte[] b, int at, byte[] ins) {
    byte[] out = new byte[b.length + ins.length];
    System.arraycopy(b, 0, out, 0, at);
    System.arraycopy(ins, 0, out, at, ins.length);
    System.arraycopy(b, at, out, at + ins.length, b.length - at);
    return out;
  }

  private static byte[][] hex(String... s) {
    byte[][] out = new byte[s.length][];
    for (int i = 0; i < s.length; i++) {
      out[i] = HexFormat.of().parseHex(s[i].replace(" ", ""));
    }
    return out;
  }
}
