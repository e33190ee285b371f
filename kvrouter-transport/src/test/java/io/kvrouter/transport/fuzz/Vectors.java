package io.kvrouter.transport.fuzz;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The golden vectors of {@code vectors/kv-events.json} as fuzzing seeds (test support). */
public final class Vectors {
  private static final Pattern PAYLOAD = Pattern.compile("\"payload_hex\"\\s*:\\s*\"([0-9a-f]*)\"");

  private Vectors() {}

  /** Every payload of the file, valid ("decode") and malformed alike, in file order. */
  public static List<byte[]> kvEventPayloads() {
    String text;
    try (InputStream in = Vectors.class.getResourceAsStream("/vectors/kv-events.json")) {
      if (in == null) throw new IllegalStateException("vectors/kv-events.json is not on the path");
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<byte[]> out = new ArrayList<>();
    Matcher m = PAYLOAD.matcher(text);
    while (m.find()) out.add(HexFormat.of().parseHex(m.group(1)));
    if (out.size() < 11)
      throw new IllegalStateException("expected >= 11 vectors, got " + out.size());
    return out;
  }
}
