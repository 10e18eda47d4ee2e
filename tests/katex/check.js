// Parse every math span given on stdin (a JSON list of {tex, display} per line) with
// KaTeX in strict mode; print a JSON list of error messages (null = parsed) per line.
// One leniency: a character KaTeX has no font for (Greek, Hebrew, Arabic,
// Ethiopic text) is accepted inside \text{…}, where the browser's fonts set it
// (KaTeX then warns "No character metrics", which only a parsed \text{} reaches);
// anywhere else in math it is still an error, as is any other strict warning.
const katex = require("katex");

function inText(token) {
  const loc = token && token.loc;
  if (!loc || !loc.lexer) return false;
  const input = loc.lexer.input;
  const groups = [];
  for (let i = 0; i < loc.start; ) {
    if (input.startsWith("\\text{", i)) {
      groups.push("text");
      i += 6;
    } else if (input[i] === "\\") {
      const word = /^\\[A-Za-z]+/.exec(input.slice(i));
      i += word ? word[0].length : 2;
    } else {
      if (input[i] === "{") groups.push("group");
      else if (input[i] === "}") groups.pop();
      i += 1;
    }
  }
  return groups.includes("text");
}

function strict(code, message, token) {
  if (code === "unknownSymbol" && inText(token)) return "ignore";
  return code === "symbolNotInFont" ? "ignore" : "error";
}

function check(spans) {
  return spans.map(({ tex, display }) => {
    try {
      katex.renderToString(tex, { displayMode: display, strict, throwOnError: true });
      return null;
    } catch (e) {
      return String(e.message);
    }
  });
}

// one JSON list per line in, one answer per line out: a test session keeps one node running
require("readline")
  .createInterface({ input: process.stdin })
  .on("line", (line) => process.stdout.write(JSON.stringify(check(JSON.parse(line))) + "\n"));
