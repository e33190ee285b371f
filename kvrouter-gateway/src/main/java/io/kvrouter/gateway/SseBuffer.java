package io.kvrouter.gateway;

import java.util.Arrays;

/**
 * Bytes of a server-sent-event stream as they arrive, cut into whole events (each ends with a blank
 * line: {@code \n\n} or {@code \r\n\r\n}); the bytes of each event are handed on exactly as
 * received. One per stream; not thread-safe.
 *
 * <pre>
 * Implementation notes
 *
 * One growable array: [start, end) holds what is not yet consumed; scan remembers how far the
 * search for the next delimiter got, so that each byte is looked at once, also across the reads
 * of one event (hasEvent() keeps it: before, it put scan back, and a first event of n bytes read
 * in k pieces was searched k times from its start). consume() moves start; append() compacts
 * (moves the rest to the front) before growing, and refuses what would make the unconsumed bytes
 * more than maxBytes: the callers consume every whole event before they append again, so those
 * bytes are one event still without its end, and the array never grows past maxBytes.
 * </pre>
 */
final class SseBuffer {
  /** The longest event (with what the same read brought after it) a stream may send. */
  static final int MAX_EVENT_BYTES = 32 << 20;

  private final int maxBytes;
  private byte[] buf;
  private int start;
  private int end;
  private int scan;

  SseBuffer() {
    this(MAX_EVENT_BYTES);
  }

  SseBuffer(int maxBytes) {
    this.maxBytes = maxBytes;
    buf = new byte[Math.min(16 * 1024, maxBytes)];
  }

  int maxBytes() {
    return maxBytes;
  }

  /** The bytes the buffer holds room for (what it costs in memory). */
  int capacity() {
    return buf.length;
  }

  /**
   * Appends {@code n} bytes of {@code b}; false (nothing appended) when the unconsumed bytes would
   * then be more than {@link #maxBytes()}: an event that long without its end.
   */
  boolean append(byte[] b, int n) {
    int live = end - start;
    if ((long) live + n > maxBytes) return false;
    if (end + n > buf.length) {
      if (live + n <= buf.length / 2 || start > 0) {
        System.arraycopy(buf, start, buf, 0, live);
        scan -= start;
        start = 0;
        end = live;
      }
      if (end + n > buf.length) {
        buf = Arrays.copyOf(buf, (int) Math.min(maxBytes, Math.max(buf.length * 2L, end + n)));
      }
    }
    System.arraycopy(b, 0, buf, end, n);
    end += n;
    return true;
  }

  byte[] array() {
    return buf;
  }

  int start() {
    return start;
  }

  int size() {
    return end - start;
  }

  /** Whether a whole event is in; the search goes on where the last one stopped. */
  boolean hasEvent() {
    return nextEventEnd() >= 0;
  }

  /** The end (exclusive, after the blank line) of the next whole event, or -1. */
  int nextEventEnd() {
    int i = Math.max(scan, start);
    for (; i < end; i++) {
      if (buf[i] != '\n') continue;
      if (i + 1 < end && buf[i + 1] == '\n') {
        scan = i;
        return i + 2;
      }
      if (i + 2 < end && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
        scan = i;
        return i + 3;
      }
    }
    scan = Math.max(start, end - 2);
    return -1;
  }

  void consume(int to) {
    start = to;
    scan = to;
    if (start == end) {
      start = 0;
      end = 0;
      scan = 0;
    }
  }

  /** Where the payload of the event's first {@code data:} line starts, or -1. */
  static int dataStart(byte[] b, int s, int e) {
    if (e - s < 5
        || b[s] != 'd'
        || b[s + 1] != 'a'
        || b[s + 2] != 't'
        || b[s + 3] != 'a'
        || b[s + 4] != ':') {
      return -1;
    }
    int i = s + 5;
    if (i < e && b[i] == ' ') i++;
    return i < e ? i : -1;
  }

  /** The end of the data line that starts at {@code ds}. */
  static int dataEnd(byte[] b, int ds, int e) {
    int i = ds;
    while (i < e && b[i] != '\n' && b[i] != '\r') i++;
    return i;
  }

  static boolean contains(byte[] b, int s, int e, byte[] needle) {
    outer:
    for (int i = s, last = e - needle.length; i <= last; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (b[i + j] != needle[j]) continue outer;
      }
      return true;
    }
    return false;
  }
}
