package io.kvrouter.tokenize.jinja;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.Locale;

/**
 * Python's {@code datetime.strftime} for the directives chat templates use (C locale).
 *
 * <pre>
 * Implementation notes
 *
 * One pass over the format; each directive is read from the ZonedDateTime the template's clock
 * gave (strftime_now), names in English, numbers zero-padded unless "%-" asks otherwise (glibc's
 * extension, which templates use for day numbers). An unknown directive is copied as written, as
 * glibc does. Stateless.
 * </pre>
 */
final class Strftime {
  private Strftime() {}

  static String format(ZonedDateTime t, String fmt) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < fmt.length(); i++) {
      char c = fmt.charAt(i);
      if (c != '%' || i + 1 >= fmt.length()) {
        sb.append(c);
        continue;
      }
      char d = fmt.charAt(++i);
      boolean noPad = false;
      if (d == '-' && i + 1 < fmt.length()) {
        noPad = true;
        d = fmt.charAt(++i);
      }
      switch (d) {
        case 'Y' -> sb.append(t.getYear());
        case 'y' -> sb.append(pad(t.getYear() % 100, 2, noPad));
        case 'm' -> sb.append(pad(t.getMonthValue(), 2, noPad));
        case 'd' -> sb.append(pad(t.getDayOfMonth(), 2, noPad));
        case 'e' ->
            sb.append(noPad ? "" + t.getDayOfMonth() : String.format("%2d", t.getDayOfMonth()));
        case 'j' -> sb.append(pad(t.getDayOfYear(), 3, noPad));
        case 'H' -> sb.append(pad(t.getHour(), 2, noPad));
        case 'I' -> sb.append(pad(t.getHour() % 12 == 0 ? 12 : t.getHour() % 12, 2, noPad));
        case 'M' -> sb.append(pad(t.getMinute(), 2, noPad));
        case 'S' -> sb.append(pad(t.getSecond(), 2, noPad));
        case 'f' -> sb.append(String.format("%06d", t.getNano() / 1000));
        case 'p' -> sb.append(t.getHour() < 12 ? "AM" : "PM");
        case 'b', 'h' -> sb.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'B' -> sb.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'a' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'A' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'w' -> sb.append(t.getDayOfWeek().getValue() % 7);
        case 'u' -> sb.append(t.getDayOfWeek().getValue());
        case 'Z' -> sb.append(t.getZone().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'z' ->
            sb.append(
                t.getOffset().getId().equals("Z")
                    ? "+0000"
                    : t.getOffset().getId().replace(":", ""));
        case 'F' -> sb.append(format(t, "%Y-%m-%d"));
        case 'T' -> sb.append(format(t, "%H:%M:%S"));
        case 'D' -> sb.append(format(t, "%m/%d/%y"));
        case '%' -> sb.append('%');
        default -> sb.append('%').append(d);
      }
    }
    return sb.toString();
  }

  private static String pad(int v, int width, boolean noPad) {
    String s = Integer.toString(v);
    return noPad || s.length() >= width ? s : "0".repeat(width - s.length()) + s;
  }
}
