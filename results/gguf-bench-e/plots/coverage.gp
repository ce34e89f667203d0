set terminal pngcairo size 900,550 font 'sans,10'
set output 'coverage.png'
set title 'Coverage vs draft vocabulary size (emitted tokens in the draft vocabulary; Avg over categories)' noenhanced
set logscale x 2
set grid
set xlabel 'vocabulary size: K (static) or W_{max} (dynamic)'
set ylabel 'coverage (%)'
set yrange [0:100]
set key bottom right noenhanced
set offsets graph 0.05, graph 0.05, 0, 0
plot 'plots/coverage-wmax.dat' using 1:2 with linespoints lw 2 pt 7 title 'dynamic window (MicroSpec), at W_max'
