package io.kvrouter.cli;

import java.util.Locale;
import picocli.CommandLine;

/** Parses sizes such as {@code 8388608}, {@code 512KiB}, {@code 8MiB}, {@code 1GiB}. */
final class SizeConverter implements CommandLine.ITypeConverter<Long> {
  @Override
  public Long convert(String value) {
    String v = value.trim();
    long unit = 1;
    String lower = v.toLowerCase(Locale.ROOT);
    for (String[] s : new String[][] {{"kib", "1024"}, {"mib", "1048576"}, {"gib", "1073741824"}}) {
      if (lower.endsWith(s[0])) {
        unit = Long.parseLong(s[1]);
        v = v.substring(0, v.length() - 3).trim();
        break;
      }
    }
    if (lower.endsWith("b") && unit == 1) v = v.substring(0, v.length() - 1).trim();
    try {
      long n = Long.parseLong(v);
      if (n < 1) throw new CommandLine.TypeConversionException("must be >= 1: " + value);
      return Math.multiplyExact(n, unit);
    } catch (NumberFormatException | ArithmeticException e) {
      throw new CommandLine.TypeConversionException(
          "not a size: '" + value + "' (bytes, or a number with KiB, MiB or GiB)");
    }
  }
}
