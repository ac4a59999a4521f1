// The Plotly charts of a live run's page, all in this one frame, that stay and append points: the
// Streamlit component protocol (v1) written out by hand (no build step), see
// app/components/live_chart.py for the other side.
//
// Each render message carries a list `charts`, one {chart, seq, base, kind, payload} per chart in the
// order shown: kind "full" is a whole figure (drawn with Plotly.react), "extend" the points after those
// of message `base` (Plotly.extendTraces), "same" nothing new. A chart's div is made when it first
// comes and removed when it no longer does. A message this frame cannot apply (a frame that was just
// mounted gets an "extend") asks the server for every figure whole once, through the component's value.
//
// Each plot div tells what was done on the DOM (what the browser test reads): data-chart,
// data-full-draws, data-appends, data-seq and data-points.
(function () {
  "use strict";
  var root = document.getElementById("charts");
  var plots = {};  // chart key -> {div, seq, draws, appends}
  var asks = 0;
  var askedFor = null;
  var height = -1;

  function send(type, data) {
    var message = { isStreamlitMessage: true, type: type };
    for (var k in data) { message[k] = data[k]; }
    window.parent.postMessage(message, "*");
  }

  function setHeight(h) {
    if (h !== height) {
      height = h;
      send("streamlit:setFrameHeight", { height: h });
    }
  }

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

  function merge(into, from) {  // deep merge of plain objects, `from` wins
    for (var k in from) {
      if (isObject(from[k]) && isObject(into[k])) { merge(into[k], from[k]); } else { into[k] = from[k]; }
    }
    return into;
  }

  // Streamlit's Plotly theme, as st.plotly_chart applies it in the browser: the template's colour
  // placeholders replaced and the theme's fonts and colours laid under the figure's own layout.
  function themed(spec, theme) {
    theme = theme || {};
    var dark = theme.base === "dark";
    var heading = dark ? "#fafafa" : "#2F2D2B";
    var bg = theme.backgroundColor || (dark ? "#0e1117" : "#FFFFFF");
    var gray70 = dark ? "#a3a8b8" : "#808495";
    var gray90 = dark ? "#e6eaf1" : "#262730";
    var grid = dark ? "#31333f" : "#e6eaf1";
    var faded = gray70;
    var text = gray90;
    var font = "\"Source Sans\", sans-serif";
    var placeholders = {
      "#000032": "#29b09d", "#000033": "#ff2b2b", "#000034": "#0068c9", "#000035": grid,
      "#000036": gray70, "#000037": gray90, "#000038": bg, "#000039": "rgba(49, 51, 63, 0.2)", "#000040": bg
    };
    var json = JSON.stringify(spec).replace(/#0000[0-4][0-9]/g, function (m) { return placeholders[m] || m; });
    var figure = JSON.parse(json);
    var layout = figure.layout || {};
    var template = layout.template || {};
    template.layout = merge(template.layout || {}, {
      font: { color: faded, family: font, size: 12 },
      title: { font: { family: font, size: 16, color: heading }, pad: { l: 4 }, xanchor: "left", x: 0 },
      legend: { title: { font: { size: 12, color: faded }, side: "top" }, valign: "top", bordercolor: "rgba(0,0,0,0)",
                borderwidth: 0, font: { size: 12, color: text } },
      paper_bgcolor: bg, plot_bgcolor: bg,
      yaxis: { ticklabelposition: "outside", zerolinecolor: grid, title: { font: { color: faded, size: 14 }, standoff: 24 },
               tickcolor: grid, tickfont: { color: faded, size: 12 }, gridcolor: grid, minor: { gridcolor: grid },
               automargin: true },
      xaxis: { zerolinecolor: grid, gridcolor: grid, showgrid: false, tickfont: { color: faded, size: 12 },
               tickcolor: grid, title: { font: { color: faded, size: 14 }, standoff: 20 }, minor: { gridcolor: grid },
               zeroline: false, automargin: true },
      margin: { pad: 8, r: 0, l: 0 },
      hoverlabel: { bgcolor: bg, bordercolor: grid, font: { color: faded, family: font, size: 12 } }
    });
    layout.template = template;
    if (layout.title !== undefined) {
      var title = typeof layout.title === "string" ? { text: layout.title } : layout.title;
      if (typeof title.text === "string") { title.text = "<b>" + title.text + "</b>"; }
      layout.title = title;
    }
    layout.autosize = true;
    delete layout.width;
    figure.layout = layout;
    return figure;
  }

  // The page's own font ("Source Sans", served by Streamlit): its @font-face rules copied from the
  // page that frames this one (the same origin), so the chart's text looks as in st.plotly_chart.
  function borrowFonts() {
    var css = [];
    try {
      var sheets = window.parent.document.styleSheets;
      for (var i = 0; i < sheets.length; i++) {
        var rules;
        try { rules = sheets[i].cssRules; } catch (e) { continue; }
        var base = sheets[i].href || window.parent.location.href;
        for (var j = 0; j < rules.length; j++) {
          var rule = rules[j];
          if (rule.type === 5 && /Source Sans/.test(rule.cssText)) {
            css.push(rule.cssText.replace(/url\("?([^")]+)"?\)/g, function (m, u) {
              return "url(\"" + new URL(u, base).href + "\")";
            }));
          }
        }
      }
    } catch (e) {
      return;  // not framed by the dashboard: the browser's sans-serif
    }
    var style = document.createElement("style");
    style.textContent = css.join("\n");
    document.head.appendChild(style);
  }
  borrowFonts();

  var config = { displaylogo: false, responsive: true, showSendToCloud: false,
                 modeBarButtonsToRemove: ["lasso2d", "select2d", "sendChartToCloud"] };

  function points(div) {
    var total = 0;
    (div.data || []).forEach(function (trace) { total += (trace.x || []).length; });
    return total;
  }

  function mark(plot) {
    plot.div.setAttribute("data-full-draws", String(plot.draws));
    plot.div.setAttribute("data-appends", String(plot.appends));
    plot.div.setAttribute("data-seq", String(plot.seq));
    plot.div.setAttribute("data-points", String(points(plot.div)));
  }

  function plotOf(chart, before) {
    var plot = plots[chart];
    if (!plot) {
      var div = document.createElement("div");
      div.className = "chart";
      div.setAttribute("data-testid", "liveChart");
      div.setAttribute("data-chart", chart);
      plot = plots[chart] = { div: div, seq: null, draws: 0, appends: 0, height: 450 };
    }
    if (plot.div.parentNode !== root || plot.div.nextSibling !== before) { root.insertBefore(plot.div, before); }
    return plot;
  }

  function askFull(wanted) {
    if (askedFor === wanted) { return; }  // once per message: the server answers with every figure whole
    askedFor = wanted;
    asks += 1;
    send("streamlit:setComponentValue", { value: { full: asks, have: wanted }, dataType: "json" });
  }

  // one chart's message; false when it cannot be applied (the whole figure is needed)
  function apply(plot, msg, theme) {
    if (msg.kind === "full") {
      var figure = themed(JSON.parse(msg.payload), theme);
      Plotly.react(plot.div, figure.data, figure.layout, config);
      plot.draws += 1;
      plot.seq = msg.seq;
      plot.height = figure.layout.height || 450;
    } else if (msg.seq === plot.seq) {
      return true;  // nothing new
    } else if (msg.kind === "extend" && msg.base === plot.seq && plot.seq !== null) {
      var added = JSON.parse(msg.payload);
      Plotly.extendTraces(plot.div, { x: added.x, y: added.y }, added.traces);
      plot.appends += 1;
      plot.seq = msg.seq;
    } else {
      return false;
    }
    mark(plot);
    return true;
  }

  function render(args, theme) {
    if (!args || !Array.isArray(args.charts)) { return; }
    var wanted = {};
    var missing = null;
    var next = root.firstChild;
    args.charts.forEach(function (msg) {
      wanted[msg.chart] = true;
      var plot = plotOf(msg.chart, next);
      next = plot.div.nextSibling;
      if (!apply(plot, msg, theme) && missing === null) { missing = msg.chart + ":" + msg.seq; }
    });
    Object.keys(plots).forEach(function (chart) {
      if (!wanted[chart]) {
        Plotly.purge(plots[chart].div);
        root.removeChild(plots[chart].div);
        delete plots[chart];
      }
    });
    var total = 0;
    args.charts.forEach(function (msg) { total += plots[msg.chart].height; });
    setHeight(total);
    if (missing !== null) { askFull(missing); }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) { return; }
    var data = event.data;
    if (data && data.type === "streamlit:render") { render(data.args, data.theme); }
  });
  send("streamlit:componentReady", { apiVersion: 1 });
})();
