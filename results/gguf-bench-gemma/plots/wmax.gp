set terminal pngcairo size 1200,500 font 'sans,10'
set output 'wmax.png'
set multiplot layout 1,2 title 'Dynamic draft vocabulary: W_{max} sweep (Avg over categories)'
set logscale x 2
set grid
set xlabel 'W_{max}'
set ylabel 'tokens/s (log scale)'
set logscale y
set key top left noenhanced
set title 'speed'
plot 'plots/wmax-0.dat' using 1:2 with linespoints lw 2 pt 7 title '--q8-matmul layerskip --draft-layers 12 --chain --tree-depth 4', 61.072 with lines dt 2 lc rgb 'black' title 'first row: AR (Gemma 3 270M, 8-bit)'
unset logscale y
set key bottom right
set ylabel 'mean accepted length (tokens / target forward)'
set title 'accepted length'
plot 'plots/wmax-0.dat' using 1:3 with linespoints lw 2 pt 7 title '--q8-matmul layerskip --draft-layers 12 --chain --tree-depth 4'
unset multiplot
