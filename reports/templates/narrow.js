function narrow(id) {  // a phone: the legend under the chart, side-by-side panels stacked
  if (window.innerWidth >= 760) return;
  const div = document.getElementById(id), layout = div.layout || {};
  const update = {"legend.orientation": "h", "legend.x": 0, "legend.y": -0.22, "legend.yanchor": "top",
                  "margin.r": 10, "margin.l": 55, "margin.t": 20, "height": 640};
  if (layout.xaxis2) {
    Object.assign(update, {"xaxis.domain": [0, 1], "xaxis2.domain": [0, 1], "yaxis.domain": [0.6, 1],
                           "yaxis2.domain": [0, 0.4], "legend.y": -0.12, "height": 1000});
  }
  div.style.height = update.height + "px";
  Plotly.relayout(div, update);
}
