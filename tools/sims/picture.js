// Drawing helpers the simulations' pictures share: words cut to fit, counts
// in words, the marks of a time axis, and the width of the pictures' font.

// px one character of the pictures' 12 px monospace font takes, and at 11 px
export const CHAR = 7.3;
export const SMALL_CHAR = 6.7;

// Words cut into lines of at most `width` characters, at their spaces (a
// word longer than that has a line of its own).
export function wrap(words, width) {
  const lines = [];
  for (const word of words.split(" ")) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last].length + 1 + word.length <= width) {
      lines[last] += ` ${word}`;
    } else {
      lines.push(word);
    }
  }
  return lines;
}

// "1 call", "2 calls", "1,250 calls"; `more` where adding an s is wrong.
export function many(count, one, more = `${one}s`) {
  return `${count.toLocaleString("en-US")} ${count === 1 ? one : more}`;
}

// Points on an axis of `length` seconds, at least `room` pixels apart, on
// round numbers (1, 2 or 5 times a power of ten), each with its words.
export function ticks(length, perSecond, room = 72) {
  let step = 10 ** Math.floor(Math.log10(length || 1e-6)) / 100;
  for (let i = 0; step * perSecond < room && i < 30; i += 1) {
    step *= [2, 2.5, 2][i % 3];              // 1, 2, 5, 10, 20, 50, ...
  }
  const [unit, scale] = step >= 1 ? ["s", 1] : step >= 0.001 ? ["ms", 1000] : ["µs", 1e6];
  const places = Math.max(0, -Math.floor(Math.log10(step * scale) + 1e-9));
  const found = [];
  for (let n = 0; n * step <= length + 1e-12; n += 1) {
    found.push([n * step, `${(n * step * scale).toFixed(places)} ${unit}`]);
  }
  return found;
}
